package e2e

// The window conformance scenarios (window/testdata/conformance) replayed
// through the real binary: each scenario becomes a JSONL file read by a file
// source, windows configured from the scenario, and a file sink; the output
// records must equal the scenario's expectations. Explicit watermarks ("wm")
// become punctuation lines, so the file carries the scenario's exact
// event-time progress. A file pipeline writes its results sorted at the end,
// so the scenarios in which one reading fires several windows are replayed
// through standard input too, whose results come in firing order.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type cliScenario struct {
	name, file string
	window     string // HCL window block body line(s)
	kind       string
	lateness   int64
	bounded    int64 // -1: punctuation
	aggs       []string
	lines      []string // JSONL input
	expect     []cliExpect
	late       int
	skip       string
	ended      bool
	// fromReading counts the expectations of the last command if it was a
	// reading; multiFire is set once a reading fires several windows.
	fromReading int
	multiFire   bool
}

type cliExpect struct {
	kind       string
	key        string
	start, end int64
	seq        int
	values     map[string]string // name → "1.5" | "null" | "~1.5"
}

const globalNeedsTrigger = "a global window needs a trigger (early_every or trigger_count) in a configuration"

func parseScenarios(t *testing.T) []*cliScenario {
	files, err := filepath.Glob("window/testdata/conformance/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	var all []*cliScenario
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sc *cliScenario
		for _, raw := range strings.Split(string(data), "\n") {
			line := raw
			if i := strings.Index(line, "#"); i >= 0 && !(i+1 < len(line) && line[i+1] >= '0' && line[i+1] <= '9') {
				line = line[:i]
			}
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			if fields[0] == "scenario" {
				sc = &cliScenario{name: strings.TrimSpace(strings.TrimPrefix(line, "scenario")), file: filepath.Base(f), bounded: -1}
				all = append(all, sc)
				continue
			}
			if sc == nil {
				continue
			}
			sc.parse(t, fields)
		}
	}
	return all
}

func (sc *cliScenario) unsupported(why string) {
	if sc.skip == "" {
		sc.skip = why
	}
}

func (sc *cliScenario) parse(t *testing.T, f []string) {
	if strings.HasPrefix(f[0], "e@") {
		sc.unsupported("readings from several inputs")
		return
	}
	if f[0] != "expect" && f[0] != "e" {
		sc.fromReading = -1
	}
	switch f[0] {
	case "rule", "stats":
	case "window":
		sc.kind = f[1]
		attrs := map[string]string{}
		for _, kv := range f[2:] {
			if kv == "proc" {
				sc.unsupported("processing time follows the binary's monotonic clock: not replayable from a file")
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			attrs[k] = v
		}
		var b strings.Builder
		dur := func(name, ms string) { fmt.Fprintf(&b, "    %s = %q\n", name, ms+"ms") }
		switch sc.kind {
		case "tumbling":
			dur("size", attrs["size"])
			if o, ok := attrs["offset"]; ok {
				dur("offset", o)
			}
		case "sliding":
			dur("size", attrs["size"])
			dur("slide", attrs["slide"])
			if o, ok := attrs["offset"]; ok {
				dur("offset", o)
			}
		case "session":
			dur("gap", attrs["gap"])
		case "count":
			fmt.Fprintf(&b, "    count = %s\n", attrs["n"])
			if s, ok := attrs["slide"]; ok {
				fmt.Fprintf(&b, "    count_slide = %s\n", s)
			}
		case "global":
			sc.unsupported(globalNeedsTrigger)
		}
		sc.window = b.String()
	case "lateness":
		sc.lateness, _ = strconv.ParseInt(f[1], 10, 64)
	case "early":
		sc.unsupported("early firings run on processing time: not replayable from a file")
	case "trigger_count":
		sc.window += "    trigger_count = " + f[1] + "\n"
		if sc.kind == "global" && sc.skip == globalNeedsTrigger {
			sc.skip = ""
		}
	case "inputs", "tick", "pt", "skew":
		sc.unsupported("several inputs, idleness and the device clock are driven by the operator test, not a file")
	case "watermark":
		sc.bounded, _ = strconv.ParseInt(f[2], 10, 64)
	case "agg":
		name, fn := f[1], f[2]
		switch {
		case fn == "count" && len(f) == 3:
			sc.aggs = append(sc.aggs, fmt.Sprintf("%s = count()", name))
		case fn == "count":
			sc.aggs = append(sc.aggs, fmt.Sprintf("%s = count(event.v%s)", name, f[3]))
		case fn == "percentile":
			sc.aggs = append(sc.aggs, fmt.Sprintf("%s = percentile(event.v%s, %s)", name, f[3], f[4]))
		default:
			sc.aggs = append(sc.aggs, fmt.Sprintf("%s = %s(event.v%s)", name, fn, f[3]))
		}
	case "e":
		sc.fromReading = 0
		if sc.ended {
			sc.unsupported("readings after the end of input")
		}
		rest := f[1:]
		if i := slices.Index(rest, "->"); i >= 0 {
			switch rest[i+1] {
			case "late":
				sc.late++
			case "dead":
				sc.unsupported("dead-lettered readings depend on the device clock")
			}
			rest = rest[:i]
		}
		obj := map[string]any{"k": rest[0]}
		ts, _ := strconv.ParseInt(rest[1], 10, 64)
		obj["t"] = ts
		for i, v := range rest[2:] {
			if v == "null" {
				obj["v"+strconv.Itoa(i)] = nil
			} else {
				n, _ := strconv.ParseFloat(v, 64)
				obj["v"+strconv.Itoa(i)] = n
			}
		}
		b, _ := json.Marshal(obj)
		sc.lines = append(sc.lines, string(b))
	case "wm":
		if sc.bounded >= 0 {
			sc.unsupported("explicit watermarks mixed with a bounded generator")
		}
		sc.lines = append(sc.lines, `{"wm":`+f[1]+`}`)
	case "end":
		sc.ended = true
	case "expect":
		e := cliExpect{kind: f[1], key: f[2], values: map[string]string{}}
		win := strings.Trim(f[3], "[)")
		s, en, _ := strings.Cut(win, ",")
		e.start, _ = strconv.ParseInt(s, 10, 64)
		e.end, _ = strconv.ParseInt(en, 10, 64)
		e.seq, _ = strconv.Atoi(strings.TrimPrefix(f[4], "#"))
		for _, kv := range f[5:] {
			if k, v, ok := strings.Cut(kv, "~"); ok {
				e.values[k] = "~" + v
			} else if k, v, ok := strings.Cut(kv, "="); ok {
				e.values[k] = v
			}
		}
		sc.expect = append(sc.expect, e)
		if sc.fromReading >= 0 {
			sc.fromReading++
			sc.multiFire = sc.multiFire || sc.fromReading > 1
		}
	default:
		t.Fatalf("%s: unknown command %q", sc.name, f[0])
	}
}

// config returns the scenario's configuration, reading input (a path, or
// "-" for standard input) and writing into dir.
func (sc *cliScenario) config(dir, input string) string {
	wm := `punctuation = "wm"`
	if sc.bounded >= 0 {
		wm = fmt.Sprintf(`max_out_of_orderness = "%dms"`, sc.bounded)
	}
	lateness := ""
	if sc.lateness > 0 {
		lateness = fmt.Sprintf("    allowed_lateness = \"%dms\"\n", sc.lateness)
	}
	lateOut := ""
	if sc.kind != "count" && sc.kind != "global" {
		lateOut = "  late_output = sink.file.late\n"
	}
	return fmt.Sprintf(`
agent {
  device_id = "conf"
  data_dir  = "%[1]s/data"
  admin     = ""
  log_level = "warn"
}
source "file" "in" {
  path = %[8]q
  timestamp {
    field = "t"
    unit  = "ms"
  }
  watermark { %[2]s }
}
sink "file" "out" { path = "%[1]s/out.jsonl" }
sink "file" "late" { path = "%[1]s/late.jsonl" }
pipeline "p" {
  from = source.file.in
  key  = event.k
  parallelism = 3
  window %[3]q {
%[4]s%[5]s  }
  aggregate {
    %[6]s
  }
  to = [sink.file.out]
%[7]s}
`, dir, wm, sc.kind, sc.window, lateness, strings.Join(sc.aggs, "\n    "), lateOut, input)
}

func TestCLI_Conformance(t *testing.T) {
	ran := 0
	for _, sc := range parseScenarios(t) {
		if sc.skip != "" {
			t.Logf("not replayed through the CLI: %s: %s (%s)", sc.file, sc.name, sc.skip)
			continue
		}
		ran++
		t.Run(sc.file+"/"+sc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(strings.Join(sc.lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := sc.config(dir, filepath.Join(dir, "in.jsonl"))
			if _, err := runEddy(t, "run", "-c", writeConfig(t, dir, cfg)); err != nil {
				t.Fatalf("eddy run: %v\nconfig:%s", err, cfg)
			}
			want := slices.Clone(sc.expect)
			slices.SortStableFunc(want, func(a, b cliExpect) int {
				if a.end != b.end {
					return cmpInt(a.end, b.end)
				}
				if c := strings.Compare(a.key, b.key); c != 0 {
					return c
				}
				if a.start != b.start {
					return cmpInt(a.start, b.start)
				}
				return a.seq - b.seq
			})
			sc.checkOutputs(t, dir, want)
		})
	}
	if ran < 30 {
		t.Fatalf("only %d scenarios replayed through the CLI", ran)
	}
}

// The scenarios of one key in which a reading fires several windows, read
// from standard input: the results come as the windows fire, in the
// scenario's order (the firings of one key come from one subtask, in its
// order; those of several keys would interleave across subtasks).
func TestCLI_ConformanceStdin(t *testing.T) {
	ran := 0
	for _, sc := range parseScenarios(t) {
		if sc.skip != "" || !sc.multiFire || !sc.oneKey() {
			continue
		}
		ran++
		t.Run(sc.file+"/"+sc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := sc.config(dir, "-")
			cmd := exec.Command(eddyBin, "run", "-c", writeConfig(t, dir, cfg))
			cmd.Stdin = strings.NewReader(strings.Join(sc.lines, "\n") + "\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("eddy run: %v\n%s\nconfig:%s", err, out, cfg)
			}
			sc.checkOutputs(t, dir, sc.expect)
		})
	}
	if ran == 0 {
		t.Fatal("no scenario in which a reading fires several windows")
	}
}

// oneKey reports whether every expected firing is of one key.
func (sc *cliScenario) oneKey() bool {
	for _, e := range sc.expect {
		if e.key != sc.expect[0].key {
			return false
		}
	}
	return true
}

// checkOutputs compares the records of dir/out.jsonl with want, in order,
// and the late side output with the scenario's late readings.
func (sc *cliScenario) checkOutputs(t *testing.T, dir string, want []cliExpect) {
	t.Helper()
	got := readOutputs(t, filepath.Join(dir, "out.jsonl"))
	if len(got) != len(want) {
		t.Fatalf("%d output records, want %d:\n%s", len(got), len(want), dumpRecords(got))
	}
	for i, w := range want {
		g := got[i]
		if g["kind"] != w.kind || g["key"] != w.key || int64(g["window_start_ms"].(float64)) != w.start ||
			int64(g["window_end_ms"].(float64)) != w.end || int(g["firing"].(float64)) != w.seq {
			t.Fatalf("record %d: got %v, want %+v\nall:\n%s", i, g, w, dumpRecords(got))
		}
		for name, wv := range w.values {
			if !valueMatches(g[name], wv) {
				t.Fatalf("record %d field %s: got %v, want %s", i, name, g[name], wv)
			}
		}
	}
	late, _ := os.ReadFile(filepath.Join(dir, "late.jsonl"))
	if n := countLines(late); n != sc.late {
		t.Fatalf("late side output has %d readings, want %d", n, sc.late)
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func valueMatches(g any, w string) bool {
	if w == "null" {
		return g == nil
	}
	f, ok := g.(float64)
	if !ok {
		return false
	}
	if rest, approx := strings.CutPrefix(w, "~"); approx {
		want, _ := strconv.ParseFloat(rest, 64)
		return math.Abs(f-want) <= 0.01*math.Abs(want)+1e-12
	}
	want, _ := strconv.ParseFloat(w, 64)
	return math.Abs(f-want) <= 1e-9*math.Max(1, math.Abs(want))
}

func readOutputs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("bad output %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func dumpRecords(rs []map[string]any) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %v %v [%v,%v) #%v\n", r["kind"], r["key"], r["window_start_ms"], r["window_end_ms"], r["firing"])
	}
	return b.String()
}
