package agent

import (
	"testing"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// The coordinator merges chains in the background, except a small state's,
// which takes a full checkpoint instead unless debug_always_merge says
// otherwise.
func TestCoordinatorConfig_MergesSmallChainsOnlyWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		name, block string
		want        int64
	}{
		{"default", "", checkpoint.DefaultMinMergeBase},
		{"debug_always_merge", "checkpoint {\n  debug_always_merge = true\n}\n", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse([]byte(`
agent { data_dir = "/tmp/unused" }
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["t/#"]
}
sink "stdout" "out" {}
pipeline "temps" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.stdout.out]
}
`+tt.block), "agent.hcl", func(string) (string, bool) { return "", false })
			if diags.HasErrors() {
				t.Fatalf("config: %s", config.FormatDiagnostics(diags))
			}
			cc := coordinatorConfig(cfg, []string{"temps/0"})
			if !cc.MergeChains || cc.MinMergeBase != tt.want {
				t.Errorf("MergeChains %v, MinMergeBase %d; want true, %d", cc.MergeChains, cc.MinMergeBase, tt.want)
			}
		})
	}
}
