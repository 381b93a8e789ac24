package failover

import (
	"slices"
	"strings"
)

// Pipeline describes one pipeline for the grouping into regions: its name,
// the sources it reads (from, then control) and the sinks it writes (to,
// late_output, dead_letter), by name.
type Pipeline struct {
	Name    string
	Sources []string
	Sinks   []string
}

// Region is a failover region (Flink's term): pipelines that share a
// source (read or control) or a sink, with those sources and sinks. A
// failure inside a region — a sink that keeps failing, a panic caught at a
// stage boundary, a state store error, a record that cannot even be
// dead-lettered — restarts only that region from the last completed
// checkpoint: its pipelines' state and watermarks, its sources rewound to
// their positions in it, its transactional sinks recovered to it. Pipelines
// that share a source must restart together, since the source has one
// position; sharing a sink ties them because the sink's epochs hold
// everyone's output.
type Region struct {
	Name    string   // the pipelines' names, comma-separated, in Pipes' order
	Pipes   []int    // indexes into the pipelines grouped, ascending
	Sources []string // source names, in order of first use
	Sinks   []string // sink names, in order of first use
}

// Regions groups pipes into regions: the connected components of "shares a
// source or a sink". Every pipeline is in exactly one region; regions come
// in the order of their first pipeline. It is a pure function of pipes.
func Regions(pipes []Pipeline) []Region {
	n := len(pipes)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	owner := map[string]int{} // "source/x" or "sink/y" → first pipeline using it
	link := func(i int, part string) {
		if j, ok := owner[part]; ok {
			parent[find(i)] = find(j)
			return
		}
		owner[part] = i
	}
	for i, p := range pipes {
		for _, part := range parts(p) {
			link(i, part)
		}
	}
	var out []Region
	byRoot := map[int]int{} // root → index in out
	for i, p := range pipes {
		root := find(i)
		k, ok := byRoot[root]
		if !ok {
			k = len(out)
			byRoot[root] = k
			out = append(out, Region{})
		}
		r := &out[k]
		r.Pipes = append(r.Pipes, i)
		for _, part := range parts(p) {
			kind, name, _ := strings.Cut(part, "/")
			switch {
			case kind == "source" && !slices.Contains(r.Sources, name):
				r.Sources = append(r.Sources, name)
			case kind == "sink" && !slices.Contains(r.Sinks, name):
				r.Sinks = append(r.Sinks, name)
			}
		}
	}
	for k := range out {
		var names []string
		for _, i := range out[k].Pipes {
			names = append(names, pipes[i].Name)
		}
		out[k].Name = strings.Join(names, ",")
	}
	return out
}

// parts lists the sources and sinks p uses, as "source/name" and
// "sink/name": a source and a sink may share a name.
func parts(p Pipeline) []string {
	var out []string
	for _, s := range p.Sources {
		out = append(out, "source/"+s)
	}
	for _, s := range p.Sinks {
		out = append(out, "sink/"+s)
	}
	return out
}
