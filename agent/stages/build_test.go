package stages

import (
	"testing"

	"github.com/eddy-edge/eddy/config"
)

// Aggregates of the same field share one compiled program, so the prepare
// stage evaluates it once per reading; other arguments keep their own.
func TestCompile_AggregatesShareFieldPrograms(t *testing.T) {
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
  aggregate {
    n     = count()
    avg   = avg(event.temp)
    hi    = max(event.temp)
    hum   = max(event.hum)
    scale = sum(event.temp * 2)
    twice = sum(event.temp * 2)
  }
  to = [sink.stdout.out]
}
`), "agent.hcl", func(string) (string, bool) { return "", false })
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	pl, diags := Compile(cfg, cfg.Pipelines[0])
	if diags.HasErrors() {
		t.Fatalf("compile: %s", config.FormatDiagnostics(diags))
	}
	args := pl.prep.AggArgs
	if len(args) != 6 || args[0] != nil {
		t.Fatalf("args %v", args)
	}
	if args[1] != args[2] {
		t.Error("avg(event.temp) and max(event.temp) compiled twice")
	}
	if args[3] == args[1] {
		t.Error("max(event.hum) shares event.temp's program")
	}
	if args[4] == args[5] {
		t.Error("computed arguments are not shared (only plain traversals are)")
	}
}
