package agent

import (
	"os"
	"path/filepath"
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
		{"control stream", "  to     = [sink.stdout.out]", "  to     = [sink.stdout.out]\n  control = source.file.ctl", "agent.hcl:18:13: error: Control stream with per-key state; This pipeline keeps per-key state"},
		{"control stream with a block", "  filter = changed(event.s)", "  control = source.file.ctl\n  alarm \"hot\" { raise = event.v > control.limit }", "agent.hcl:15:13: error: Control stream with per-key state; This pipeline keeps per-key state (per-key functions, report_by_exception, alarm, dedup or absence), whose expressions run in its keyed subtasks in each key's order, and they cannot read control.*. Remove control; to change a threshold or a deadband at run time, edit it in this file and send SIGHUP"},
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
			_, diags = compile(cfg, cfg.Pipelines[0])
			if out := config.FormatDiagnostics(diags); !strings.Contains(out, c.want) {
				t.Fatalf("diagnostics:\n%s\nwant %q", out, c.want)
			}
		})
	}
}

// TestKeyed_PlanMovesExpressions checks that a pipeline with per-key
// functions evaluates its filter and map in the keyed subtasks (its
// prepare stage only decodes, stamps and keys), in event-time order.
func TestKeyed_PlanMovesExpressions(t *testing.T) {
	a := mustBuildAgent(t, strings.Replace(keyedAgentConfig, "event.device", "event.d", 1), false)
	p := a.pipelines[0]
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
