package stages

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

func TestStateShape_Differs(t *testing.T) {
	base := stateShape{Window: "sliding event 30s 10s", Key: "event.device", Source: "in", Aggregates: []string{"n = count() q=0"}}
	for _, c := range []struct {
		name   string
		change func(*stateShape)
		want   string
	}{
		{"same", func(*stateShape) {}, ""},
		{"window", func(s *stateShape) { s.Window = "sliding event 60s 10s" }, "the window"},
		{"key", func(s *stateShape) { s.Key = "event.site" }, "the key"},
		{"source", func(s *stateShape) { s.Source = "other" }, "the source"},
		{"an aggregate", func(s *stateShape) { s.Aggregates = []string{"n = count(event.v) q=0"} }, "the aggregates"},
		{"one more aggregate", func(s *stateShape) { s.Aggregates = append(s.Aggregates[:1:1], "m = max(event.v) q=0") }, "the aggregates"},
		{"window and key: the window first", func(s *stateShape) { s.Window, s.Key = "", "" }, "the window"},
		{"per-key functions", func(s *stateShape) { s.Keyed = "; changed(event.s)" }, "the per-key functions"},
	} {
		next := base
		c.change(&next)
		if got := base.differs(next); got != c.want {
			t.Errorf("%s: differs = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestOtherWindowState(t *testing.T) {
	for _, c := range []struct {
		bucket, mine string
		want         string // "" for not another layout's
	}{
		{"window/windows", windowStatePerWindow, ""},
		{"panes/windows", windowStatePanes, ""},
		{"window/timers", windowStatePanes, windowStatePerWindow},
		{"panes/windows", windowStatePerWindow, windowStatePanes},
		{"inflight", windowStatePanes, ""},
		{"held", windowStatePerWindow, ""},
		{"windows/x", windowStatePanes, ""}, // a longer name is not "window"
		{"window", windowStatePanes, ""},    // no "/": not a window state bucket
	} {
		name, ok := otherWindowState([]byte(c.bucket), c.mine)
		if ok != (c.want != "") || name != c.want {
			t.Errorf("otherWindowState(%q, %q) = %q, %v; want %q", c.bucket, c.mine, name, ok, c.want)
		}
	}
}

// shapeTestConfig is a pipeline whose parts each case of
// TestCheckRestore_NamesChanges changes.
const shapeTestConfig = `agent {
  data_dir    = "/nonexistent/eddy"
  parallelism = 2
}
source "file" "in" {
  path = "in.jsonl"
  timestamp { field = "ts" }
}
sink "stdout" "out" {}
pipeline "p" {
  from   = source.file.in
  key    = event.device
  filter = event.v > 0
  map { c = event.v * 2 }
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    avg = avg(event.v)
  }
  to = [sink.stdout.out]
}
`

// TestCheckRestore_NamesChanges: a checkpoint taken under shapeTestConfig,
// restored under a changed one, names every part that changed and how;
// a change the state depends on refuses the restore (or drops the state
// with --allow-non-restored-state), a filter's or a map's restores.
func TestCheckRestore_NamesChanges(t *testing.T) {
	shape := func(src string) []byte {
		t.Helper()
		cfg := loadTestConfig(t, src)
		pl, diags := Compile(cfg, cfg.Pipelines[0])
		if diags.HasErrors() {
			t.Fatal(config.FormatDiagnostics(diags))
		}
		return pl.StateShape([]byte(src))
	}
	m := &checkpoint.Manifest{ID: 7, Extra: map[string][]byte{shapeExtraKey("p"): shape(shapeTestConfig)}}
	for _, c := range []struct {
		name     string
		from, to string
		want     string // the changes, as validate lists them
		refused  string // in run's error; "" when it restores
	}{
		{"same", "", "", "", ""},
		{"aggregate added", "    avg = avg(event.v)\n", "    avg = avg(event.v)\n    top = max(event.v)\n",
			"aggregates changed (top added)", "the aggregates changed since (top added)"},
		{"aggregate changed and removed", "    n   = count()\n    avg = avg(event.v)\n", "    avg = max(event.v)\n",
			"aggregates changed (avg: avg(event.v) → max(event.v), n removed)", "the aggregates changed since (avg: avg(event.v) → max(event.v), n removed)"},
		{"window size and lateness", `window "tumbling" { size = "10s" }`, `window "tumbling" {
    size = "1m"
    allowed_lateness = "5s"
  }`, "window changed (size 10s → 1m0s, allowed_lateness 0s → 5s)", "the window changed since (size 10s → 1m0s, allowed_lateness 0s → 5s)"},
		{"key and window", "  key    = event.device\n  filter = event.v > 0\n  map { c = event.v * 2 }\n  window \"tumbling\" { size = \"10s\" }",
			"  key    = event.site\n  filter = event.v > 0\n  map { c = event.v * 2 }\n  window \"tumbling\" { size = \"20s\" }",
			"window changed (size 10s → 20s), key changed (event.device → event.site)",
			"the window and the key changed since (window: size 10s → 20s; key: event.device → event.site)"},
		{"filter", "event.v > 0", "event.v >= 0", "filter changed (event.v > 0 → event.v >= 0)", ""},
		{"map", "map { c = event.v * 2 }", "map {\n    c = event.v * 3\n    d = 1\n  }", "map changed (c: event.v * 2 → event.v * 3, d added)", ""},
	} {
		src := strings.Replace(shapeTestConfig, c.from, c.to, 1)
		v := CheckRestore(m, "p", shape(src), 2, false)
		var got []string
		for _, ch := range v.Changes {
			got = append(got, ch.String())
		}
		if strings.Join(got, ", ") != c.want {
			t.Errorf("%s: changes %q, want %q", c.name, strings.Join(got, ", "), c.want)
		}
		switch {
		case c.refused == "" && v.Refusal != nil:
			t.Errorf("%s: refused: %v", c.name, v.Refusal)
		case c.refused != "" && (v.Refusal == nil || !strings.Contains(v.Refusal.Error(), `checkpoint 7 holds pipeline "p"'s state, and `+c.refused+", which")):
			t.Errorf("%s: refusal %v, want one saying %q", c.name, v.Refusal, c.refused)
		}
		if dropped := CheckRestore(m, "p", shape(src), 2, true); dropped.Refusal != nil || dropped.Drop != (c.refused != "") {
			t.Errorf("%s: with --allow-non-restored-state: drop %v, refusal %v", c.name, dropped.Drop, dropped.Refusal)
		}
		if !v.Stateful || !v.InCheckpoint {
			t.Errorf("%s: stateful %v, in checkpoint %v", c.name, v.Stateful, v.InCheckpoint)
		}
	}
	if v := CheckRestore(m, "q", shape(shapeTestConfig), 2, false); v.InCheckpoint || v.Refusal != nil {
		t.Errorf("a pipeline the checkpoint does not hold: in checkpoint %v, refusal %v", v.InCheckpoint, v.Refusal)
	}
}
