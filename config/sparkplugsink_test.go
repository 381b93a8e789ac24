package config

import (
	"strings"
	"testing"
)

const sparkplugSinkBase = `source "file" "in" { path = "in.jsonl" }
sink "file" "dead" { path = "dead.jsonl" }
pipeline "p" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to   = [sink.sparkplug.scada]
}
sink "sparkplug" "scada" {
  broker   = "tcp://127.0.0.1:1883"
`

func TestParse_SparkplugSink(t *testing.T) {
	for _, tt := range []struct {
		name      string
		attrs     string
		extra     string // appended after the sink block
		check     func(t *testing.T, s *SparkplugSink)
		pos, want string // an error's "line:col" and a substring of its line
	}{
		{name: "defaults", attrs: `group_id = "plant1"`, check: func(t *testing.T, s *SparkplugSink) {
			if s.GroupID != "plant1" || s.EdgeNodeID != "${device_id}" || s.PrimaryHostID != "" || s.ClientID != "eddy-${device_id}-scada" || s.ProtocolVersion != 5 {
				t.Errorf("decoded %+v", s)
			}
		}},
		{name: "set", attrs: "group_id = \"plant1\"\nedge_node_id = \"line-${device_id}\"\nprimary_host_id = \"scada-1\"\nusername = \"u\"\nprotocol_version = 4",
			check: func(t *testing.T, s *SparkplugSink) {
				if s.EdgeNodeID != "line-${device_id}" || s.PrimaryHostID != "scada-1" || s.Username != "u" || s.ProtocolVersion != 4 {
					t.Errorf("decoded %+v", s)
				}
			}},
		{name: "buffer", attrs: "group_id = \"g\"\nmax_devices = 50\nbuffer {\n  max_disk = \"64MiB\"\n}", check: func(t *testing.T, s *SparkplugSink) {
			if s.Buffer.MaxDiskBytes != 64<<20 || s.Buffer.WhenFull != "drop_oldest" || s.MaxDevices != 50 {
				t.Errorf("decoded %+v", s)
			}
		}},
		{name: "buffer block when full", attrs: "group_id = \"g\"\nbuffer {\n  when_full = \"block\"\n}",
			pos: "14:15", want: `Invalid value; "when_full" must be one of "drop_oldest"; got "block"`},
		{name: "buffer too small", attrs: "group_id = \"g\"\nbuffer {\n  max_disk = \"64KiB\"\n}",
			pos: "14:14", want: `Value out of range; "max_disk" must be at least 1MiB`},
		{name: "group required", attrs: "", pos: "10:1", want: `Missing required argument; The sink "sparkplug" "scada" block needs "group_id"`},
		{name: "group with a slash", attrs: `group_id = "plant/1"`,
			pos: "12:12", want: `Invalid Sparkplug id; "plant/1" contains '/', '+' or '#': a Sparkplug id is one topic level`},
		{name: "host with a wildcard", attrs: "group_id = \"g\"\nprimary_host_id = \"#\"",
			pos: "13:19", want: `Invalid Sparkplug id; "#" contains`},
		{name: "node template with a slash", attrs: "group_id = \"g\"\nedge_node_id = \"line/${device_id}\"",
			pos: "13:16", want: `Invalid Sparkplug id; "line/${device_id}" contains '/', '+' or '#'`},
		{name: "mqtt 3.1", attrs: "group_id = \"g\"\nprotocol_version = 3",
			pos: "13:20", want: `Protocol version not supported; The Sparkplug sink speaks MQTT 5 (protocol_version = 5, the default: 3.1.1 when the broker refuses 5) or MQTT 3.1.1 (4)`},
		{name: "unknown variable", attrs: "group_id = \"g\"\nedge_node_id = \"${pipeline}\"",
			pos: "13:19", want: `Template variable not allowed here; ${pipeline} cannot be used in "edge_node_id", which accepts only ${device_id}`},
		{name: "two pipelines", attrs: `group_id = "g"`, extra: `pipeline "q" {
  from = source.file.in
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to   = [sink.sparkplug.scada]
}`, pos: "18:11", want: `Sparkplug sink fed by two pipelines; Pipeline "p" already sends to sink.sparkplug.scada`},
		{name: "no window", attrs: `group_id = "g"`, extra: `pipeline "q" {
  from = source.file.in
  to   = [sink.sparkplug.scada]
}`, pos: "16:11", want: `Sparkplug sink takes window results only; A Sparkplug sink publishes each key's aggregates as a device's metrics, and pipeline "q" has no window`},
		{name: "one node twice", attrs: "group_id = \"g\"\nedge_node_id = \"line-1\"", extra: `sink "sparkplug" "scada2" {
  broker       = "tcp://127.0.0.1:1883/"
  group_id     = "g"
  edge_node_id = "line-1"
}`, pos: "18:18", want: `Duplicate Sparkplug edge node; sink.sparkplug.scada (test.hcl:10,1-25) is already edge node "line-1" of group "g" on tcp://127.0.0.1:1883/: two sinks with one node id steal each other's session`},
		{name: "one node twice through device_id", attrs: "group_id = \"g\"", extra: `sink "sparkplug" "scada2" {
  broker       = "tcp://127.0.0.1:1883"
  group_id     = "g"
  edge_node_id = "dev-1"
}`, pos: "17:18", want: `Duplicate Sparkplug edge node; sink.sparkplug.scada (test.hcl:10,1-25) is already edge node "dev-1" of group "g"`},
		{name: "client id of an mqtt sink", attrs: "group_id = \"g\"\nclient_id = \"gw-up\"", extra: `sink "mqtt" "up" {
  broker    = "tcp://127.0.0.1:1883"
  client_id = "gw-up"
  topic     = "r/${key}"
}`, pos: "13:13", want: `Duplicate MQTT client id; sink.mqtt.up (test.hcl:15,1-17) already connects to tcp://127.0.0.1:1883 as "gw-up"`},
		{name: "dead letters", attrs: `group_id = "g"`, extra: `pipeline "q" {
  from        = source.file.in
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to          = [sink.file.dead]
  dead_letter = sink.sparkplug.scada
}`, pos: "19:17", want: `Sparkplug sink takes window results only; A Sparkplug sink publishes each key's aggregates as a device's metrics; late readings and dead letters are not metrics`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := sparkplugSinkBase + tt.attrs + "\n}\n" + tt.extra
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
			tt.check(t, cfg.SinkByName("scada").Sparkplug)
		})
	}
}
