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

func TestParse_MQTTSinkCloudLimits(t *testing.T) {
	for _, tt := range []struct {
		name    string
		topic   string // replaces the base's "r/${key}" when set
		attrs   string
		payload int64
		levels  int
		diag    string // the one diagnostic expected: "line:col: severity: " prefix and a substring, "" = none
		detail  string
	}{
		{name: "defaults: no limits"},
		{name: "aws payload", attrs: `max_payload = "128KiB"`, payload: 128 << 10},
		{name: "payload zero", attrs: `max_payload = 0`,
			diag: "test.hcl:12:15: error: Value out of range;", detail: `between 1 byte and MQTT's own limit`},
		{name: "payload above mqtt", attrs: `max_payload = "512MiB"`,
			diag: "test.hcl:12:15: error: Value out of range;", detail: `"256MiB"`},
		{name: "fixed topic within", topic: "eddy/results/avg", attrs: "max_topic_levels = 8", levels: 8},
		{name: "fixed topic beyond", topic: "a/b/c/d", attrs: "max_topic_levels = 3", levels: 3,
			diag: "test.hcl:11:12: warning: Topic has too many levels;", detail: `"a/b/c/d" has 4 levels, more than max_topic_levels = 3`},
		{name: "key may add levels", attrs: "max_topic_levels = 8", levels: 8,
			diag: "test.hcl:11:12: warning: Topic may have too many levels;", detail: `"r/${key}" has 2 levels of at most 8 (max_topic_levels), but a key may contain "/"`},
		{name: "device id cannot add levels", topic: "d/${device_id}/${pipeline}", attrs: "max_topic_levels = 3", levels: 3},
		{name: "levels zero", attrs: "max_topic_levels = 0",
			diag: "test.hcl:12:20: error: Value out of range;", detail: `"max_topic_levels" must be between 1 and 128`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := mqttSinkBase
			if tt.topic != "" {
				src = strings.Replace(src, "r/${key}", tt.topic, 1)
			}
			src += tt.attrs + "\n}\n"
			cfg, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(src), "test.hcl")
			out := FormatDiagnostics(diags)
			if tt.diag == "" {
				if len(diags) != 0 {
					t.Fatalf("want no diagnostics, got:\n%s", out)
				}
			} else if len(diags) != 1 || !strings.HasPrefix(out, tt.diag) || !strings.Contains(out, tt.detail) {
				t.Fatalf("want one %q containing %q, got:\n%s", tt.diag, tt.detail, out)
			}
			if diags.HasErrors() {
				return
			}
			m := cfg.Sinks[0].MQTT
			if m.MaxPayload != tt.payload || m.MaxTopicLevels != tt.levels {
				t.Errorf("max_payload %d, max_topic_levels %d; want %d, %d", m.MaxPayload, m.MaxTopicLevels, tt.payload, tt.levels)
			}
		})
	}
}

func TestParse_MQTTSinkProtocolVersion(t *testing.T) {
	for _, tt := range []struct {
		name      string
		attrs     string
		version   int
		pos, want string // an error's "line:col" and a substring of its line
	}{
		{name: "default", version: 5},
		{name: "3.1.1", attrs: "protocol_version = 4", version: 4},
		{name: "5", attrs: "protocol_version = 5", version: 5},
		{name: "paho sink default", attrs: "delivery = \"at_most_once\"\nqos = 0", version: 4},
		{name: "paho sink 3.1.1", attrs: "delivery = \"at_most_once\"\nqos = 0\nprotocol_version = 4", version: 4},
		{name: "3", attrs: "protocol_version = 3",
			pos: "12:20", want: `Invalid protocol version; "protocol_version" is 5 (MQTT 5, the default`},
		{name: "5.0", attrs: "protocol_version = 5.5",
			pos: "12:20", want: `Invalid protocol version; "protocol_version" is 5`},
		{name: "string", attrs: `protocol_version = "v5"`,
			pos: "12:20", want: `"protocol_version"`},
		{name: "5 on a paho sink", attrs: "delivery = \"at_most_once\"\nqos = 0\nprotocol_version = 5",
			pos: "14:20", want: `Protocol version not supported here; A sink that does not use its write-ahead log`},
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
			if v := cfg.Sinks[0].MQTT.ProtocolVersion; v != tt.version {
				t.Errorf("protocol_version %d, want %d", v, tt.version)
			}
		})
	}
}

func TestParse_MQTTSinkExpiry(t *testing.T) {
	for _, tt := range []struct {
		name             string
		attrs            string
		message, session time.Duration
		pos, want        string // an error's "line:col" and a substring of its line
	}{
		{name: "defaults"},
		{name: "set", attrs: "message_expiry = \"1h\"\nsession_expiry = \"720h\"", message: time.Hour, session: 720 * time.Hour},
		{name: "message expiry at 3.1.1", attrs: "protocol_version = 4\nmessage_expiry = \"10m\"", message: 10 * time.Minute},
		{name: "session expiry at 3.1.1", attrs: "protocol_version = 4\nsession_expiry = \"1h\"",
			pos: "13:18", want: `Argument does not apply; "session_expiry" is MQTT 5's Session Expiry Interval`},
		{name: "zero", attrs: `message_expiry = "0s"`,
			pos: "12:18", want: `Value out of range; "message_expiry" must be at least "1s"`},
		{name: "on a paho sink", attrs: "delivery = \"at_most_once\"\nqos = 0\nmessage_expiry = \"1h\"",
			pos: "14:18", want: `Argument does not apply; "message_expiry" applies to a sink that publishes through its write-ahead log`},
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
			if m := cfg.Sinks[0].MQTT; m.MessageExpiry != tt.message || m.SessionExpiry != tt.session {
				t.Errorf("message_expiry %v, session_expiry %v; want %v, %v", m.MessageExpiry, m.SessionExpiry, tt.message, tt.session)
			}
		})
	}
}
