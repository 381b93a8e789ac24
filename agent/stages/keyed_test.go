package stages

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/keyed"
)

const keyedAgentConfig = `
agent {
  data_dir = "%DATA%"
  admin    = ""
}
source "file" "in" {
  path = "in.jsonl"
  timestamp { field = "ts" }
}
source "file" "ctl" { path = "ctl.jsonl" }
sink "stdout" "out" {}
pipeline "p" {
  from   = source.file.in
  key    = event.device
  filter = changed(event.s)
  map { device = lower(event.d) }
  to     = [sink.stdout.out]
}
`

// TestKeyed_BuildDiagnostics pins what only the agent's compile can tell
// of a pipeline with per-key functions: the expression position and hint.
func TestKeyed_BuildDiagnostics(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"key reads a map field", "", "", "agent.hcl:14:12: error: Key reads a map field; In a pipeline with per-key functions the key is computed before the map"},
		{"computed control key", "  filter = changed(event.s)", "  control = source.file.ctl\n  filter = changed(event.s) && event.v > control.limit[event.device]", "agent.hcl:16:42: error: Computed control key in per-key expressions; In a pipeline with per-key state, expressions read the control values captured when the reading arrived, so a control path must be constant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := keyedAgentConfig
			if c.from != "" {
				src = strings.Replace(strings.Replace(src, "key    = event.device", "key    = event.d", 1), c.from, c.to, 1)
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "agent.hcl")
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(src, "%DATA%", dir)), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, diags := config.Load(path)
			if diags.HasErrors() {
				t.Fatal(config.FormatDiagnostics(diags))
			}
			_, diags = Compile(cfg, cfg.Pipelines[0])
			if out := config.FormatDiagnostics(diags); !strings.Contains(out, c.want) {
				t.Fatalf("diagnostics:\n%s\nwant %q", out, c.want)
			}
		})
	}
}

// TestKeyed_ControlCaptured checks that a pipeline with per-key state
// reading control.* compiles: its prepare stage captures the paths its
// per-key expressions and blocks read (each once), its key reads the live
// state, and a pipeline whose per-key expressions read none captures
// nothing.
func TestKeyed_ControlCaptured(t *testing.T) {
	for _, c := range []struct {
		name, to string
		want     [][]string
	}{
		{"filter and alarm", "  control = source.file.ctl\n  filter = changed(event.s) && event.v > control.min\n  alarm \"hot\" {\n raise = event.v > control.limit[\"hi\"]\n clear = event.v < control.min\n }",
			[][]string{{"min"}, {"limit", "hi"}}},
		{"key only", "  control = source.file.ctl\n  key = coalesce(control.alias, event.d)\n  filter = changed(event.s)", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(strings.Replace(keyedAgentConfig, "key    = event.device\n", "", 1), "  filter = changed(event.s)", c.to, 1)
			dir := t.TempDir()
			path := filepath.Join(dir, "agent.hcl")
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(src, "%DATA%", dir)), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, diags := config.Load(path)
			if diags.HasErrors() {
				t.Fatal(config.FormatDiagnostics(diags))
			}
			pl, diags := Compile(cfg, cfg.Pipelines[0])
			if diags.HasErrors() {
				t.Fatal(config.FormatDiagnostics(diags))
			}
			if c.want == nil {
				if pl.prep.Capture != nil || pl.keyed.eval.Control != nil {
					t.Fatalf("captures %v, want nothing", pl.prep.Capture.Paths())
				}
				if !pl.prep.Key.ReadsControl() {
					t.Fatal("the key does not read the control state")
				}
				return
			}
			if pl.prep.Capture == nil || pl.prep.ControlState != pl.control || pl.keyed.eval.Control != pl.prep.Capture {
				t.Fatalf("capture %v, state %v, keyed %v", pl.prep.Capture, pl.prep.ControlState, pl.keyed.eval.Control)
			}
			if got := pl.prep.Capture.Paths(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("captured paths %q, want %q", got, c.want)
			}
		})
	}
}

// TestKeyed_PlanMovesExpressions checks that a pipeline with per-key
// functions evaluates its filter and map in the keyed subtasks (its
// prepare stage only decodes, stamps and keys), in event-time order.
func TestKeyed_PlanMovesExpressions(t *testing.T) {
	src := strings.Replace(keyedAgentConfig, "event.device", "event.d", 1)
	p := newTestPipeline(t, loadTestConfig(t, src), src, 1<<20)
	if !p.eventTime || p.shape == nil {
		t.Fatalf("pipeline: event time %v, shape %s", p.eventTime, p.shape)
	}
	for _, st := range p.subtasks {
		k := st.task.Keyed()
		if k == nil || st.backend == nil {
			t.Fatalf("subtask %d: keyed stage %v, backend %v", st.index, k, st.backend)
		}
		if k.Operator().Order() != keyed.EventTime {
			t.Errorf("subtask %d: order %d, want event time", st.index, k.Operator().Order())
		}
	}
}
