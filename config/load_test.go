package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func noEnv(string) (string, bool) { return "", false }

func fixedDeviceID() (string, error) { return "dev-1", nil }

// mustParse decodes src and fails the test on any diagnostic.
func mustParse(t *testing.T, src string, env func(string) (string, bool)) *Config {
	t.Helper()
	cfg, diags := Loader{Env: env, DeviceID: fixedDeviceID}.Parse([]byte(src), "test.hcl")
	if len(diags) > 0 {
		t.Fatalf("Parse:\n%s", FormatDiagnostics(diags))
	}
	return cfg
}

// A valid prefix the mistakes below build on; it ends on line 9.
const base = `source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a/b"]
}
sink "stdout" "out" {}
pipeline "p" {
  from = source.mqtt.sensors
  to   = [sink.stdout.out]
}
`

func TestParse_Mistakes(t *testing.T) {
	tests := []struct {
		name string
		src  string
		env  map[string]string
		// pos is "line:col" of the error; want is a substring of its line.
		pos, want string
	}{
		{
			name: "unknown attribute",
			src:  base + "agent {\n  device_idd = \"x\"\n}\n",
			pos:  "11:3", want: `Unsupported argument; An argument named "device_idd" is not expected here. Did you mean "device_id"?`,
		},
		{
			name: "memory limit too small",
			src:  base + "agent {\n  memory_limit = \"8MiB\"\n}\n",
			pos:  "11:18", want: `Value out of range; "memory_limit" must be at least 16MiB; leave it out to size it to the device.`,
		},
		{
			name: "state cache too small",
			src:  base + "state {\n  cache = \"64KiB\"\n}\n",
			pos:  "11:11", want: `Value out of range; "cache" must be at least 1MiB; leave it out to size it to the device.`,
		},
		{
			name: "ingest linger too long",
			src:  base + "ingest {\n  linger = \"2s\"\n}\n",
			pos:  "11:12", want: `Value out of range; "linger" must be at most 1s`,
		},
		{
			name: "unknown ingest compression",
			src:  base + "ingest {\n  compression = \"lz4\"\n}\n",
			pos:  "11:17", want: `"compression"`,
		},
		{
			name: "unknown block type",
			src:  base + "chekpoint {}\n",
			pos:  "10:1", want: `Did you mean "checkpoint"?`,
		},
		{
			name: "wrong type",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  qos = \"high\"", 1),
			pos:  "4:9", want: `Incorrect attribute value type; "qos" must be a number`,
		},
		{
			name: "negative duration",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  keepalive = \"-5s\"", 1),
			pos:  "4:15", want: `Negative duration; "keepalive" must be zero or positive`,
		},
		{
			name: "bad duration syntax",
			src:  "checkpoint {\n  interval = \"10 seconds\"\n}\n",
			pos:  "2:14", want: `Invalid duration; "10 seconds" is not a duration: durations look like "500ms", "2s"`,
		},
		{
			name: "negative max_chain_ratio",
			src:  "checkpoint {\n  max_chain_ratio = -1\n}\n",
			pos:  "2:21", want: `Value out of range; "max_chain_ratio" must be between 0 and 1000; got -1.`,
		},
		{
			name: "duration without unit",
			src:  "checkpoint {\n  interval = 10\n}\n",
			pos:  "2:14", want: `needs a unit, written as a string`,
		},
		{
			name: "max_keys negative",
			src:  strings.Replace(base, "  to   = [sink.stdout.out]", "  to   = [sink.stdout.out]\n  max_keys = -5", 1),
			pos:  "9:14", want: `Value out of range; "max_keys" must be a number of keys, or 0 for no limit; got -5.`,
		},
		{
			name: "max_keys without a window",
			src:  strings.Replace(base, "  to   = [sink.stdout.out]", "  to   = [sink.stdout.out]\n  max_keys = 10", 1),
			pos:  "9:14", want: `Key limit without window; max_keys bounds the keys holding window state`,
		},
		{
			name: "broker burst without a rate",
			src:  base + "broker {\n  listen = \"127.0.0.1:1883\"\n  max_messages_burst = 5\n}\n",
			pos:  "12:24", want: `Burst without rate; max_messages_burst is the burst of max_messages_per_second`,
		},
		{
			name: "acl subscribe filter invalid",
			src:  base + "broker {\n  listen = \"127.0.0.1:1883\"\n  acl {\n    user      = \"*\"\n    subscribe = [\"sensors/${username}/#\", \"a/#/b\"]\n  }\n}\n",
			pos:  "14:43", want: `Invalid topic filter; "a/#/b": "#" must be the whole last level of a filter, as in "sensors/#".`,
		},
		{
			name: "acl publish filter invalid",
			src:  base + "broker {\n  listen = \"127.0.0.1:1883\"\n  acl {\n    user    = \"*\"\n    publish = [\"sensors/x+\"]\n  }\n}\n",
			pos:  "14:16", want: `Invalid topic filter; "sensors/x+": "+" must be a whole level of a filter`,
		},
		{
			name: "acl granting nothing",
			src:  base + "broker {\n  listen = \"127.0.0.1:1883\"\n  acl {\n    user = \"dev1\"\n  }\n}\n",
			pos:  "12:3", want: `Empty acl; An acl grants what its publish and subscribe filters list; add one`,
		},
		{
			name: "acl subscribe with an unknown variable",
			src:  base + "broker {\n  listen = \"127.0.0.1:1883\"\n  acl {\n    user      = \"*\"\n    subscribe = [\"cmd/${key}/#\"]\n  }\n}\n",
			pos:  "14:25", want: `Template variable not allowed here; ${key} cannot be used in "subscribe", which accepts only ${device_id} and ${username}.`,
		},
		{
			name: "broker rate negative",
			src:  base + "broker {\n  listen = \"127.0.0.1:1883\"\n  max_messages_per_second = -1\n}\n",
			pos:  "12:29", want: `Value out of range; "max_messages_per_second" must be between 0 and 1000000; got -1.`,
		},
		{
			name: "qos 3",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  qos = 3", 1),
			pos:  "4:9", want: `Value out of range; "qos" must be between 0 and 2; got 3.`,
		},
		{
			name: "max_inflight negative",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  max_inflight = -1", 1),
			pos:  "4:18", want: `Value out of range; "max_inflight" must be between 0 and 65535; got -1.`,
		},
		{
			name: "max_inflight above MQTT's packet ids",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  max_inflight = 70000", 1),
			pos:  "4:18", want: `Value out of range; "max_inflight" must be between 0 and 65535; got 70000.`,
		},
		{
			name: "max_inflight with the embedded broker",
			src:  strings.Replace(strings.Replace(base, `"tcp://127.0.0.1:1883"`, `"embedded"`, 1), `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  max_inflight = 20", 1),
			pos:  "4:18", want: `Argument does not apply; "max_inflight" is an external broker's in-flight window`,
		},
		{
			name: "source protocol_version 3",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  protocol_version = 3", 1),
			pos:  "4:22", want: `Invalid protocol version; "protocol_version" is 5 (MQTT 5, the default`,
		},
		{
			name: "source protocol_version 5 on ws://",
			src:  strings.Replace(strings.Replace(base, `"tcp://127.0.0.1:1883"`, `"ws://127.0.0.1:8080"`, 1), `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  protocol_version = 5", 1),
			pos:  "4:22", want: `Protocol version not supported here; A source on a ws:// or wss:// broker speaks MQTT 3.1.1 only`,
		},
		{
			name: "source session_expiry at 3.1.1",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  protocol_version = 4\n  session_expiry = \"1h\"", 1),
			pos:  "5:20", want: `Argument does not apply; "session_expiry" is an MQTT 5 property`,
		},
		{
			name: "source session_expiry below a second",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  session_expiry = \"10ms\"", 1),
			pos:  "4:20", want: `Value out of range; "session_expiry" must be at least "1s"`,
		},
		{
			name: "source receive_maximum 0",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  receive_maximum = 0", 1),
			pos:  "4:21", want: `Value out of range; "receive_maximum" must be between 1 and 65535; got 0.`,
		},
		{
			name: "source receive_maximum with the embedded broker",
			src:  strings.Replace(strings.Replace(base, `"tcp://127.0.0.1:1883"`, `"embedded"`, 1), `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  receive_maximum = 20", 1),
			pos:  "4:21", want: `Argument does not apply; "receive_maximum" is for an external broker at MQTT 5`,
		},
		{
			name: "dedup_key not a field path",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  dedup_key = \"meta..id\"", 1),
			pos:  "4:15", want: `Invalid field path; "meta..id" is not a field path`,
		},
		{
			name: "dedup_key on a csv source",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  format = \"csv\"\n  dedup_key = \"id\"", 1),
			pos:  "5:15", want: `Argument does not apply; "dedup_key" reads a field of a JSON payload; this source's format is "csv".`,
		},
		{
			name: "dedup_window without dedup_key",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  dedup_window = \"5m\"", 1),
			pos:  "4:18", want: `Argument does not apply; "dedup_window" is how long the ids of dedup_key are remembered`,
		},
		{
			name: "dedup_window zero",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  dedup_key = \"id\"\n  dedup_window = \"0s\"", 1),
			pos:  "5:18", want: `Value out of range; "dedup_window" must be positive`,
		},
		{
			name: "empty topic list",
			src:  strings.Replace(base, `["a/b"]`, `[]`, 1),
			pos:  "3:12", want: `Empty topic list`,
		},
		{
			name: "invalid topic filter",
			src:  strings.Replace(base, `["a/b"]`, `["ok/+", "a/#/b"]`, 1),
			pos:  "3:21", want: `Invalid topic filter; "a/#/b": "#" must be the whole last level`,
		},
		{
			name: "shared subscription without a filter",
			src:  strings.Replace(base, `["a/b"]`, `["$share/g"]`, 1),
			pos:  "3:13", want: `Invalid topic filter; "$share/g": a shared subscription is "$share/GROUP/FILTER"`,
		},
		{
			name: "shared subscription with connections",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["$share/g/a/b"]`+"\n  connections = 2", 1),
			pos:  "3:13", want: `Shared subscription twice; With connections = 2 the source subscribes`,
		},
		{
			name: "undefined source reference",
			src:  strings.Replace(base, `source.mqtt.sensors`, `source.mqtt.sensor`, 1),
			pos:  "7:10", want: `Reference to undeclared source; There is no source "sensor" of type "mqtt". Did you mean "sensors"`,
		},
		{
			name: "source reference with the wrong type",
			src:  strings.Replace(base, `source.mqtt.sensors`, `source.file.sensors`, 1),
			pos:  "7:10", want: `Did you mean source.mqtt.sensors?`,
		},
		{
			name: "undefined sink reference",
			src:  strings.Replace(base, `[sink.stdout.out]`, `[sink.stdout.out, sink.stdout.ot]`, 1),
			pos:  "8:28", want: `Reference to undeclared sink; There is no sink "ot" of type "stdout". Did you mean "out"`,
		},
		{
			name: "unknown template variable",
			src: base + `sink "mqtt" "cloud" {
  broker = "tcp://127.0.0.1:1883"
  topic  = "sites/${devce_id}/${key}"
}
`,
			pos: "12:21", want: `Unknown template variable; There is no variable "devce_id"; "topic" accepts only ${device_id}, ${pipeline}, ${key}, ${window_start} and ${window_end}. Did you mean "device_id"?`,
		},
		{
			name: "template variable not allowed in this field",
			src:  strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  client_id = \"eddy-${key}\"", 1),
			pos:  "4:23", want: `Template variable not allowed here; ${key} cannot be used in "client_id", which accepts only ${device_id}.`,
		},
		{
			name: "escaped unknown template variable",
			src:  "upload \"s3\" {\n  endpoint = \"m:9000\"\n  bucket = \"eddy\"\n  prefix = \"$${host}/\"\n}\n",
			pos:  "4:12", want: `Unknown template variable; There is no variable ${host}`,
		},
		{
			name: "aws_iot credentials without role_alias",
			src:  "upload \"s3\" {\n  endpoint = \"s3.eu-west-1.amazonaws.com\"\n  bucket = \"eddy\"\n  credentials {\n    provider = \"aws_iot\"\n    endpoint = \"c2.credentials.iot.eu-west-1.amazonaws.com\"\n    cert_file = \"d.pem\"\n    key_file = \"d.key\"\n  }\n}\n",
			pos:  "4:3", want: `Missing required argument; The credentials block needs "role_alias"`,
		},
		{
			name: "unknown credentials provider",
			src:  "upload \"s3\" {\n  endpoint = \"m:9000\"\n  bucket = \"eddy\"\n  credentials {\n    provider = \"aws-iot\"\n  }\n}\n",
			pos:  "5:16", want: `Invalid value; "provider" must be one of`,
		},
		{
			name: "credentials setting of another provider",
			src:  "upload \"s3\" {\n  endpoint = \"m:9000\"\n  bucket = \"eddy\"\n  credentials {\n    provider = \"minio_sts_certificate\"\n    cert_file = \"d.pem\"\n    key_file = \"d.key\"\n    role_alias = \"r\"\n  }\n}\n",
			pos:  "8:18", want: `Unused credentials setting; "role_alias" applies only to provider = "aws_iot"`,
		},
		{
			name: "static keys and a credentials block",
			src:  "upload \"s3\" {\n  endpoint = \"m:9000\"\n  bucket = \"eddy\"\n  access_key = \"a\"\n  secret_key = \"s\"\n  credentials {\n    provider = \"default\"\n  }\n}\n",
			pos:  "6:3", want: `Two credential sources`,
		},
		{
			name: "missing env var",
			src:  "agent {\n  device_id = \"d\"\n  admin_token = env(\"EDDY_TOKEN\")\n}\n",
			pos:  "3:17", want: `Missing environment variable; The environment variable "EDDY_TOKEN" is not set. Set it, or give a default: env("EDDY_TOKEN", "default").`,
		},
		{
			name: "admin beyond loopback without token",
			src:  "agent {\n  admin = \"0.0.0.0:8787\"\n}\n",
			pos:  "2:11", want: `Admin endpoint needs a token`,
		},
		{
			name: "embedded source without broker block",
			src:  strings.Replace(base, `"tcp://127.0.0.1:1883"`, `"embedded"`, 1),
			pos:  "2:12", want: `No embedded broker; broker = "embedded" needs a top-level broker block`,
		},
		{
			name: "simulator without broker block",
			src:  "source \"simulator\" \"sim\" {\n}\n",
			pos:  "1:1", want: `No embedded broker`,
		},
		{
			name: "broker beyond loopback without auth",
			src:  "broker {\n  listen = \":1883\"\n}\n",
			pos:  "2:12", want: `Open broker beyond loopback`,
		},
		{
			name: "max_message_size beyond the ingest segment",
			src:  "broker {\n  listen = \"127.0.0.1:1883\"\n  max_message_size = \"1MiB\"\n}\ningest { max_disk = \"2MiB\" }\n",
			pos:  "3:22", want: `Message size beyond the ingest log`,
		},
		{
			name: "broker beyond loopback with TLS but no client CA",
			src:  "broker {\n  listen = \":1883\"\n  tls {\n    cert = \"c.pem\"\n    key = \"k.pem\"\n  }\n}\n",
			pos:  "2:12", want: `Open broker beyond loopback`,
		},
		{
			name: "bad broker URL",
			src:  strings.Replace(base, `"tcp://127.0.0.1:1883"`, `"mqtt://127.0.0.1:1883"`, 1),
			pos:  "2:12", want: `Invalid broker URL; "mqtt://127.0.0.1:1883": unsupported scheme`,
		},
		{
			name: "duplicate pipeline name",
			src:  base + "pipeline \"p\" {\n  from = source.mqtt.sensors\n  to = [sink.stdout.out]\n}\n",
			pos:  "10:10", want: `Duplicate pipeline name; A pipeline named "p" is already declared at test.hcl:6,1-13`,
		},
		{
			name: "duplicate source name across types",
			src:  base + "source \"file\" \"sensors\" {\n  path = \"-\"\n}\n",
			pos:  "10:15", want: `Duplicate source name`,
		},
		{
			name: "event-time window without timestamp",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" {
    time = "event"
    size = "1m"
  }
  aggregate { n = count() }`, 1),
			pos: "10:12", want: `Event time without timestamp; Source "sensors" has no timestamp block`,
		},
		{
			name: "unknown window kind",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumblin" {
    size = "1m"
  }
  aggregate { n = count() }`, 1),
			pos: "9:10", want: `Did you mean "tumbling"?`,
		},
		{
			name: "window offset not below size",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" {
    size   = "1m"
    offset = "1m"
  }
  aggregate { n = count() }`, 1),
			pos: "11:14", want: `Value out of range; "offset" must be more than -size and less than size (1m0s); offset = "0s" gives the same windows.`,
		},
		{
			name: "negative window offset not above -size",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" {
    size   = "24h"
    offset = "-32h"
  }
  aggregate { n = count() }`, 1),
			pos: "11:14", want: `Value out of range; "offset" must be more than -size and less than size (24h0m0s); offset = "16h0m0s" gives the same windows.`,
		},
		{
			name: "sliding offset not below slide",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "sliding" {
    size   = "1m"
    slide  = "10s"
    offset = "-10s"
  }
  aggregate { n = count() }`, 1),
			pos: "12:14", want: `Value out of range; "offset" must be more than -slide and less than slide (10s); offset = "0s" gives the same windows.`,
		},
		{
			name: "window offset with two signs",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" {
    size   = "1m"
    offset = "--5s"
  }
  aggregate { n = count() }`, 1),
			pos: "11:14", want: `Invalid duration; "--5s" is not a duration`,
		},
		{
			name: "sliding window without slide",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "sliding" {
    size = "1m"
  }
  aggregate { n = count() }`, 1),
			pos: "9:3", want: `Missing required argument; The window "sliding" block needs "slide"`,
		},
		{
			name: "argument of another window kind",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "session" {
    gap  = "1m"
    size = "1m"
  }
  aggregate { n = count() }`, 1),
			pos: "11:5", want: `Argument does not apply; A session window does not use "size"`,
		},
		{
			name: "bad aggregate function",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" { size = "1m" }
  aggregate {
    a = avgg(event.temp)
  }`, 1),
			pos: "11:9", want: `Unknown aggregate function; There is no aggregate "avgg"; use one of count, sum`,
		},
		{
			name: "percentile q out of range",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" { size = "1m" }
  aggregate {
    p = percentile(event.temp, 1.5)
  }`, 1),
			pos: "11:32", want: `Quantile out of range; The quantile must be strictly between 0 and 1`,
		},
		{
			name: "count with two arguments",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" { size = "1m" }
  aggregate {
    n = count(event.temp, event.x)
  }`, 1),
			pos: "11:14", want: `Wrong number of arguments; count() counts readings; count(event.x) counts readings where event.x is not null.`,
		},
		{
			name: "invalid enum with suggestion",
			src:  "agent {\n  log_level = \"warning\"\n}\n",
			pos:  "2:15", want: `Invalid value; "log_level" must be one of "debug", "info", "warn", "error"; got "warning". Did you mean "warn"?`,
		},
		{
			name: "invalid size",
			src:  "state {\n  cache = \"32mb\"\n}\n",
			pos:  "2:11", want: `Invalid size; "32mb" is not a size: sizes look like "512KiB"`,
		},
		{
			name: "exactly once at qos 0",
			src: base + `sink "mqtt" "cloud" {
  broker = "tcp://127.0.0.1:1883"
  topic  = "t"
  qos    = 0
}
`,
			pos: "13:12", want: `QoS too low for delivery`,
		},
		{
			name: "missing required argument",
			src:  base + "sink \"file\" \"f\" {}\n",
			pos:  "10:1", want: `Missing required argument; The sink "file" "f" block needs "path"`,
		},
		{
			name: "unknown source type",
			src:  "source \"mqqt\" \"x\" {}\n",
			pos:  "1:8", want: `Unknown source type; There is no source type "mqqt"; use one of "mqtt", "file", "simulator". Did you mean "mqtt"?`,
		},
		{
			name: "timestamp unit and layout together",
			src: strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]
  timestamp {
    field  = "ts"
    unit   = "ms"
    layout = "rfc3339"
  }`, 1),
			pos: "7:14", want: `Conflicting arguments`,
		},
		{
			name: "duplicate singleton block",
			src:  "state {}\nstate {}\n",
			pos:  "2:1", want: `Duplicate state block; Only one state block is allowed here; the first is at test.hcl:1,1-6.`,
		},
		{
			name: "reserved aggregate name",
			src: strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  window "tumbling" { size = "1m" }
  aggregate {
    key = count()
  }`, 1),
			pos: "11:5", want: `Reserved field name`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			cfg, diags := Loader{Env: env, DeviceID: fixedDeviceID}.Parse([]byte(tt.src), "test.hcl")
			if !diags.HasErrors() || cfg != nil {
				t.Fatalf("want an error, got cfg=%v diags:\n%s", cfg != nil, FormatDiagnostics(diags))
			}
			for _, diag := range diags {
				if diag.Subject == nil || diag.Summary == "" || diag.Detail == "" {
					t.Errorf("diagnostic without subject, summary or detail: %+v", diag)
				}
			}
			out := FormatDiagnostics(diags)
			prefix := "test.hcl:" + tt.pos + ": error: "
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, prefix) && strings.Contains(line, tt.want) {
					return
				}
			}
			t.Errorf("no %q at %s in:\n%s", tt.want, tt.pos, out)
		})
	}
}

// Negative window offsets within (−size, size), or (−slide, slide), are
// Flink's: "-8h" on 24h windows starts the days at midnight in UTC+8.
func TestParse_WindowOffsets(t *testing.T) {
	tests := []struct {
		window string
		want   time.Duration
	}{
		{`window "tumbling" {
    size   = "24h"
    offset = "-8h"
  }`, -8 * time.Hour},
		{`window "tumbling" {
    size   = "1m"
    offset = "-59999ms"
  }`, -59999 * time.Millisecond},
		{`window "tumbling" {
    size   = "1m"
    offset = "15s"
  }`, 15 * time.Second},
		{`window "sliding" {
    size   = "1m"
    slide  = "10s"
    offset = "-3s"
  }`, -3 * time.Second},
		{`window "tumbling" { size = "1m" }`, 0},
	}
	for _, tt := range tests {
		cfg := mustParse(t, strings.Replace(base, `  to   = [sink.stdout.out]`, `  to   = [sink.stdout.out]
  `+tt.window+`
  aggregate { n = count() }`, 1), noEnv)
		if got := cfg.Pipelines[0].Window.Offset; got != tt.want {
			t.Errorf("%s: offset %v, want %v", tt.window, got, tt.want)
		}
	}
}

func TestParse_CollectsAllErrors(t *testing.T) {
	src := "agent {\n  log_level = \"loud\"\n  parallelism = 0\n}\ncheckpoint {\n  interval = \"-1s\"\n  retain = 0\n}\n"
	_, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(src), "test.hcl")
	if got := len(diags.Errs()); got != 4 {
		t.Fatalf("got %d errors, want 4:\n%s", got, FormatDiagnostics(diags))
	}
}

func TestParse_Defaults(t *testing.T) {
	cfg := mustParse(t, base, noEnv)
	if cfg.Agent.DeviceID != "dev-1" || cfg.Agent.DataDir != "./eddy-data" || cfg.Agent.Admin != "127.0.0.1:8787" ||
		cfg.Agent.MaxKeyGroups != 128 || cfg.Agent.Parallelism != 1 || cfg.Agent.LogLevel != "info" || cfg.Agent.LogFormat != "text" ||
		cfg.Agent.MemoryLimit != 0 { // sized to the device at start
		t.Errorf("agent defaults: %+v", cfg.Agent)
	}
	m := cfg.Sources[0].MQTT
	if m.ClientID != "eddy-${device_id}-sensors" || m.QoS != 1 || m.KeepAlive != 30*time.Second ||
		m.ReconnectMin != time.Second || m.ReconnectMax != time.Minute || m.CleanSession || cfg.Sources[0].Format != "json" {
		t.Errorf("mqtt source defaults: %+v", m)
	}
	if m.DedupKey != "" || m.DedupWindow != 10*time.Minute || m.MaxInflight != 1000 {
		t.Errorf("dedup defaults: key %q, window %s, max_inflight %d", m.DedupKey, m.DedupWindow, m.MaxInflight)
	}
	if m := mustParse(t, strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  max_inflight = 0", 1), noEnv).Sources[0].MQTT; m.MaxInflight != 0 {
		t.Errorf("max_inflight = 0 read as %d", m.MaxInflight)
	}
	dd := mustParse(t, strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]`+"\n  dedup_key = \"meta.id\"\n  dedup_window = \"1h\"", 1), noEnv)
	if m := dd.Sources[0].MQTT; m.DedupKey != "meta.id" || m.DedupWindow != time.Hour {
		t.Errorf("dedup: key %q, window %s", m.DedupKey, m.DedupWindow)
	}
	if p := cfg.Pipelines[0]; p.Parallelism != 1 || p.Window != nil || p.Filter != nil {
		t.Errorf("pipeline defaults: %+v", p)
	}
	if cfg.State != (State{Backend: "bbolt", MaxSizeBytes: 1 << 30, ReadCheckpoints: true}) { // cache: sized to the device at start
		t.Errorf("state defaults: %+v", cfg.State)
	}
	wantCP := Checkpoint{Interval: 10 * time.Second, Timeout: time.Minute, TolerableFailures: 3, Retain: 3, MaxSavepoints: 10, Mode: CheckpointExactlyOnce, MaxChainRatio: 1.5}
	if cfg.Checkpoint != wantCP {
		t.Errorf("checkpoint defaults: %+v", cfg.Checkpoint)
	}
	if cfg.Ingest != (Ingest{Ack: AckAfterFsync, SyncInterval: 100 * time.Millisecond, MaxDiskBytes: 1 << 30, Linger: DefaultIngestLinger, Compression: IngestCompressionZstd}) {
		t.Errorf("ingest defaults: %+v", cfg.Ingest)
	}
	if cfg.Broker != nil || cfg.Upload != nil {
		t.Errorf("optional blocks should be nil")
	}
}

// ingest { compression } takes each codec by name.
func TestParse_IngestCompression(t *testing.T) {
	for _, c := range []string{IngestCompressionZstd, IngestCompressionS2, IngestCompressionNone} {
		t.Run(c, func(t *testing.T) {
			cfg := mustParse(t, base+"ingest {\n  compression = \""+c+"\"\n}\n", noEnv)
			if cfg.Ingest.Compression != c {
				t.Fatalf("compression %q, want %q", cfg.Ingest.Compression, c)
			}
		})
	}
}

// memory_limit and state { cache } take sizes.
func TestParse_MemorySizes(t *testing.T) {
	cfg := mustParse(t, base+"agent {\n  memory_limit = \"96MiB\"\n}\nstate {\n  cache = \"8MiB\"\n}\n", noEnv)
	if cfg.Agent.MemoryLimit != 96<<20 || cfg.State.CacheBytes != 8<<20 {
		t.Fatalf("memory_limit %d, cache %d", cfg.Agent.MemoryLimit, cfg.State.CacheBytes)
	}
}

func TestParse_EnvAndFile(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/secret", "s3cret\n"); err != nil {
		t.Fatal(err)
	}
	src := `agent {
  device_id   = env("ID")
  data_dir    = env("MISSING", "/tmp/eddy")
  admin_token = file("secret")
}
` + base
	env := func(k string) (string, bool) {
		if k == "ID" {
			return "gw-7", true
		}
		return "", false
	}
	cfg, diags := Loader{Env: env, DeviceID: fixedDeviceID}.Parse([]byte(src), dir+"/eddy.hcl")
	if len(diags) > 0 {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.Agent.DeviceID != "gw-7" || cfg.Agent.DataDir != "/tmp/eddy" || cfg.Agent.AdminToken != "s3cret" {
		t.Errorf("agent = %+v", cfg.Agent)
	}
}

func TestParse_DeviceIDLookupFails(t *testing.T) {
	fail := func() (string, error) { return "", fmt.Errorf("no id") }
	_, diags := Loader{Env: noEnv, DeviceID: fail}.Parse([]byte(base), "test.hcl")
	if !strings.Contains(FormatDiagnostics(diags), "Cannot determine the device id") {
		t.Errorf("diags = %s", FormatDiagnostics(diags))
	}
}

func TestParse_Warnings(t *testing.T) {
	cfg, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(base+"sink \"stdout\" \"idle\" {}\n"), "test.hcl")
	if cfg == nil || diags.HasErrors() {
		t.Fatalf("warnings must not fail the load:\n%s", FormatDiagnostics(diags))
	}
	want := "test.hcl:10:1: warning: Unused sink; No pipeline writes to sink.stdout.idle."
	if got := FormatDiagnostics(diags); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// full_every is still read (it caps the chain's length) but warned about
// at its value, naming the setting that replaces it.
func TestParse_FullEveryDeprecated(t *testing.T) {
	cfg, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(base+"checkpoint {\n  full_every = 10\n}\n"), "test.hcl")
	if cfg == nil || diags.HasErrors() {
		t.Fatalf("full_every must still load:\n%s", FormatDiagnostics(diags))
	}
	got := FormatDiagnostics(diags)
	if !strings.HasPrefix(got, "test.hcl:11:16: warning: Deprecated argument;") || !strings.Contains(got, "max_chain_ratio") {
		t.Errorf("diagnostics %q, want a warning at full_every's value naming max_chain_ratio", got)
	}
	if cfg.Checkpoint.FullEvery != 10 || cfg.Checkpoint.MaxChainRatio != 1.5 {
		t.Errorf("checkpoint %+v, want full_every 10 and the default ratio", cfg.Checkpoint)
	}
	cfg = mustParse(t, base+"checkpoint {\n  max_chain_ratio = 0.25\n}\n", noEnv)
	if cfg.Checkpoint.MaxChainRatio != 0.25 || cfg.Checkpoint.FullEvery != 0 {
		t.Errorf("checkpoint %+v", cfg.Checkpoint)
	}
}

func TestParse_SyntaxError(t *testing.T) {
	_, diags := Parse([]byte("agent {\n  x = \n}\n"), "test.hcl", noEnv)
	if !diags.HasErrors() || !strings.HasPrefix(FormatDiagnostics(diags), "test.hcl:2:") {
		t.Errorf("diags = %s", FormatDiagnostics(diags))
	}
}

func TestFingerprint(t *testing.T) {
	a := mustParse(t, base, noEnv).Fingerprint()
	b := mustParse(t, strings.ReplaceAll(base, "\n", "  \r\n"), noEnv).Fingerprint()
	c := mustParse(t, strings.Replace(base, "a/b", "a/c", 1), noEnv).Fingerprint()
	if len(a) != 64 || a != b || a == c {
		t.Errorf("fingerprints: a=%s b=%s c=%s", a, b, c)
	}
}

func TestExpand(t *testing.T) {
	got := Expand("sites/${device_id}/${pipeline}/${key}/${other}", map[string]string{"device_id": "d", "pipeline": "p", "key": "k"})
	if want := "sites/d/p/k/${other}"; got != want {
		t.Errorf("Expand = %q, want %q", got, want)
	}
}
