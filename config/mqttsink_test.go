package config

import (
	"strings"
	"testing"
	"time"
)

const mqttSinkBase = `source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a/b"]
}
pipeline "p" {
  from = source.mqtt.sensors
  to   = [sink.mqtt.up]
}
sink "mqtt" "up" {
  broker = "tcp://127.0.0.1:1884"
  topic  = "r/${key}"
`

func TestParse_MQTTSinkWindowAndDrain(t *testing.T) {
	for _, tt := range []struct {
		name      string
		attrs     string
		inflight  int
		drain     time.Duration
		pos, want string // an error's "line:col" and a substring of its line
	}{
		{name: "defaults", inflight: 20, drain: 30 * time.Second},
		{name: "set", attrs: "max_inflight = 1000\ndrain_timeout = \"2m\"", inflight: 1000, drain: 2 * time.Minute},
		{name: "no drain wait", attrs: `drain_timeout = "0s"`, inflight: 20, drain: 0},
		{name: "exactly once at qos 1", attrs: "qos = 1", inflight: 20, drain: 30 * time.Second},
		{name: "window zero", attrs: "max_inflight = 0",
			pos: "12:16", want: `Value out of range; "max_inflight" must be between 1 and 65535`},
		{name: "window on at_least_once", attrs: "delivery = \"at_least_once\"\nqos = 1\nmax_inflight = 100", inflight: 100, drain: 30 * time.Second},
		{name: "drain on at_most_once", attrs: "delivery = \"at_most_once\"\nqos = 0\ndrain_timeout = \"5s\"",
			pos: "14:17", want: `Argument does not apply; "drain_timeout" applies to the sink's write-ahead log`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := mqttSinkBase + tt.attrs + "\n}\n"
			cfg, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(src), "test.hcl")
			if tt.want != "" {
				out := FormatDiagnostics(diags)
				prefix := "test.hcl:" + tt.pos + ": error: "
				for _, line := range strings.Split(out, "\n") {
					if strings.HasPrefix(line, prefix) && strings.Contains(line, tt.want) {
						return
					}
				}
				t.Fatalf("no %q at %s in:\n%s", tt.want, tt.pos, out)
			}
			if diags.HasErrors() {
				t.Fatalf("Parse:\n%s", FormatDiagnostics(diags))
			}
			m := cfg.Sinks[0].MQTT
			if m.MaxInflight != tt.inflight || m.DrainTimeout != tt.drain {
				t.Errorf("max_inflight %d, drain_timeout %v; want %d, %v", m.MaxInflight, m.DrainTimeout, tt.inflight, tt.drain)
			}
		})
	}
}
