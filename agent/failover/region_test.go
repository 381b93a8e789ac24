package failover

import (
	"slices"
	"strings"
	"testing"
)

// TestRegions: pipelines that share a source (read or control) or a sink
// (to, late_output, dead_letter) form one region, with those sources and
// sinks; pipelines sharing nothing are each their own region.
func TestRegions(t *testing.T) {
	pipe := func(name string, sources []string, sinks ...string) Pipeline {
		return Pipeline{Name: name, Sources: sources, Sinks: sinks}
	}
	src := func(names ...string) []string { return names }
	for _, tc := range []struct {
		name  string
		pipes []Pipeline
		want  []string // "pipelines sources sinks", sorted
	}{
		{"separate", []Pipeline{pipe("x", src("a"), "one"), pipe("y", src("b"), "two")},
			[]string{"x a one", "y b two"}},
		{"shared source", []Pipeline{pipe("x", src("a"), "one"), pipe("y", src("a"), "two"), pipe("z", src("b"), "three")},
			[]string{"x,y a one,two", "z b three"}},
		{"shared sink", []Pipeline{pipe("x", src("a"), "one"), pipe("y", src("b"), "one")},
			[]string{"x,y a,b one"}},
		// y's control source is x's source; z's dead letters go to y's sink.
		{"control source and dead letters", []Pipeline{pipe("x", src("a"), "one"), pipe("y", src("b", "a"), "two"), pipe("z", src("c"), "three", "two")},
			[]string{"x,y,z a,b,c one,three,two"}},
		{"a source and a sink of the same name", []Pipeline{pipe("x", src("a"), "one"), pipe("y", src("b"), "a")},
			[]string{"x a one", "y b a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			seen := map[int]bool{}
			for _, r := range Regions(tc.pipes) {
				for _, i := range r.Pipes {
					if seen[i] {
						t.Fatalf("pipeline %d in two regions", i)
					}
					seen[i] = true
				}
				srcs, sinks := slices.Sorted(slices.Values(r.Sources)), slices.Sorted(slices.Values(r.Sinks))
				got = append(got, r.Name+" "+strings.Join(srcs, ",")+" "+strings.Join(sinks, ","))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("regions %q, want %q", got, tc.want)
			}
			if len(seen) != len(tc.pipes) {
				t.Fatalf("%d of %d pipelines in a region", len(seen), len(tc.pipes))
			}
		})
	}
}
