package config

import (
	"strings"
	"testing"
	"time"
)

// keyedBase has a source with a timestamp; a pipeline is appended from line 9.
const keyedBase = `source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a/b"]
  timestamp { field = "ts" }
}
sink "stdout" "out" {}
sink "file" "late" { path = "late.jsonl" }
`

// TestKeyed_Mistakes pins the diagnostics of per-key function settings:
// position, summary and the hint of the fix.
func TestKeyed_Mistakes(t *testing.T) {
	for _, tc := range []struct {
		name, pipeline, pos, want string
	}{
		{"state_ttl without functions", `pipeline "p" {
  from      = source.mqtt.sensors
  state_ttl = "24h"
  to        = [sink.stdout.out]
}`, "10:15", "state_ttl without per-key functions; state_ttl bounds the state of per-key functions"},
		{"order without functions", `pipeline "p" {
  from  = source.mqtt.sensors
  order = "arrival"
  to    = [sink.stdout.out]
}`, "10:11", "order without per-key functions"},
		{"unknown order", `pipeline "p" {
  from   = source.mqtt.sensors
  filter = changed(event.s)
  order  = "event"
  to     = [sink.stdout.out]
}`, "11:12", `"order" must be one of "event_time", "arrival"; got "event". Did you mean "event_time"?`},
		{"per-key function in key", `pipeline "p" {
  from = source.mqtt.sensors
  key  = prev(event.d)
  to   = [sink.stdout.out]
}`, "10:10", "Per-key function in key"},
		{"event_time order on processing time", `pipeline "p" {
  from   = source.mqtt.sensors
  filter = changed(event.s)
  order  = "event_time"
  key    = event.d
  window "tumbling" {
    size = "1m"
    time = "processing"
  }
  aggregate { n = count() }
  to = [sink.stdout.out]
}`, "11:12", `Event-time order without event time; order = "event_time" needs event time`},
		{"allowed lateness", `pipeline "p" {
  from   = source.mqtt.sensors
  filter = changed(event.s)
  key    = event.d
  window "tumbling" {
    size             = "1m"
    allowed_lateness = "10s"
  }
  aggregate { n = count() }
  to = [sink.stdout.out]
}`, "12:3", `allowed_lateness with per-key functions in event-time order; A reading behind the watermark cannot be put back`},
		{"late output in arrival order", `pipeline "p" {
  from        = source.mqtt.sensors
  filter      = changed(event.s)
  order       = "arrival"
  to          = [sink.stdout.out]
  late_output = sink.file.late
}`, "13:17", "Late output without event time"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkKeyedDiagnostic(t, tc.pipeline, tc.pos, tc.want) })
	}
}

// TestKeyed_Settings decodes state_ttl and order, and late_output on a
// pipeline whose per-key functions run in event-time order.
func TestKeyed_Settings(t *testing.T) {
	cfg := mustParse(t, keyedBase+`pipeline "p" {
  from        = source.mqtt.sensors
  filter      = changed(event.s)
  map { d = delta(event.c) }
  key         = event.d
  state_ttl   = "24h"
  order       = "event_time"
  to          = [sink.stdout.out]
  late_output = sink.file.late
}
`, noEnv)
	p := cfg.Pipelines[0]
	if p.StateTTL != 24*time.Hour || p.Order != OrderEventTime || p.LateOutput == nil {
		t.Errorf("state_ttl %v, order %q, late_output %v", p.StateTTL, p.Order, p.LateOutput)
	}
	var names []string
	for _, c := range p.KeyedCalls() {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "changed,delta" {
		t.Errorf("keyed calls %v, want changed, delta", names)
	}
}

// checkKeyedDiagnostic parses keyedBase with pipeline (from line 8) and
// checks for an error at pos (line:col) containing want.
func checkKeyedDiagnostic(t *testing.T, pipeline, pos, want string) {
	t.Helper()
	_, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(keyedBase+pipeline+"\n"), "test.hcl")
	out := FormatDiagnostics(diags)
	prefix := "test.hcl:" + pos + ": error: "
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, want) {
			return
		}
	}
	t.Errorf("no %q at %s in:\n%s", want, pos, out)
}
