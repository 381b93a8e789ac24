package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/scripts/testpki"
)

// A file source and a stdout sink: the rest of each case's configuration
// is added to it, and its agent settings replace %AGENT%.
const preflightBase = `agent {
  device_id = "d1"
  data_dir  = "%DATA%"
%AGENT%}
source "file" "f" { path = "in.jsonl" }
sink "stdout" "o" {}
`

const preflightPipeline = `pipeline "p" {
  from = source.file.f
  to   = [sink.stdout.o]
}
`

// preflightCases are configurations that `eddy run` refuses at start for a
// reason in the configuration alone: the component that refuses it, and
// the block that validate must point at, marked "# <-" (col: the first
// character of that line; unmarked: the start of the file).
var preflightCases = []struct {
	name      string
	agent     string // lines of the agent block
	cfg       string
	summary   string
	refusedBy string // the component's own error text
}{
	{"exactly-once sink over wss", "", `
sink "mqtt" "up" { # <-
  broker = "wss://127.0.0.1:1"
  topic  = "a/b"
}
pipeline "q" {
  from = source.file.f
  to   = [sink.mqtt.up]
}`, "Invalid exactly-once MQTT sink", `walsink: options: broker scheme "wss" (want tcp, ssl or tls)`},
	{"exactly-once sink without client id", "", `
sink "mqtt" "up" { # <-
  broker    = "tcp://127.0.0.1:1"
  topic     = "a/b"
  client_id = ""
}
pipeline "q" {
  from = source.file.f
  to   = [sink.mqtt.up]
}`, "Invalid exactly-once MQTT sink", "walsink: options: client id is required"},
	{"mqtt source without client id", "", `
source "mqtt" "m" { # <-
  broker    = "tcp://127.0.0.1:1"
  topics    = ["a/b"]
  client_id = ""
}
pipeline "q" {
  from = source.mqtt.m
  to   = [sink.stdout.o]
}`, "Invalid MQTT source", "source: mqtt client id is required"},
	{"shared subscription of a $ topic", "", `
source "mqtt" "m" { # <-
  broker      = "tcp://127.0.0.1:1"
  topics      = ["$SYS/broker/load"]
  connections = 2
}
pipeline "q" {
  from = source.mqtt.m
  to   = [sink.stdout.o]
}`, "Invalid MQTT source", "a shared subscription cannot take a '$' topic"},
	{"simulator fractions above 1", "", `
broker { listen = "127.0.0.1:0" }
source "simulator" "s" { # <-
  out_of_order = 0.6
  late         = 0.6
}
pipeline "q" {
  from = source.simulator.s
  to   = [sink.stdout.o]
}`, "Invalid simulator", "source: simulator fractions"},
	{"source CA file missing", "", `
source "mqtt" "m" {
  broker = "ssl://127.0.0.1:1"
  topics = ["a/b"]
  tls { ca = "%DATA%/missing-ca.pem" } # <-
}
pipeline "q" {
  from = source.mqtt.m
  to   = [sink.stdout.o]
}`, "Unusable TLS files", "read CA: open"},
	{"sink client certificate missing", "", `
sink "mqtt" "up" {
  broker   = "ssl://127.0.0.1:1"
  topic    = "a/b"
  delivery = "at_least_once"
  qos      = 1
  tls { # <-
    cert = "%DATA%/missing.crt"
    key  = "%DATA%/missing.key"
  }
}
pipeline "q" {
  from = source.file.f
  to   = [sink.mqtt.up]
}`, "Unusable TLS files", "load certificate: open"},
	{"sparkplug sink CA file missing", "", `
sink "sparkplug" "scada" {
  broker   = "ssl://127.0.0.1:1"
  group_id = "plant1"
  tls { ca = "%DATA%/missing-ca.pem" } # <-
}
pipeline "q" {
  from = source.file.f
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to   = [sink.sparkplug.scada]
}`, "Unusable TLS files", "read CA: open"},
	{"embedded broker certificate missing", "", `
broker {
  listen = "127.0.0.1:0"
  tls { # <-
    cert = "%DATA%/missing.crt"
    key  = "%DATA%/missing.key"
  }
}
source "mqtt" "m" {
  broker = "embedded"
  topics = ["a/b"]
}
pipeline "q" {
  from = source.mqtt.m
  to   = [sink.stdout.o]
}`, "Unusable TLS files", "load certificate: open"},
	{"checkpoint interval below 1ms", "", `
checkpoint { interval = "100us" } # <-
` + preflightPipeline, "Invalid checkpointing", "interval 100µs must be at least 1ms"},
	{"no pipeline", "", "", "Invalid checkpointing", "checkpoint: invalid config: no tasks"},
	{"admin certificate missing", `  admin     = "127.0.0.1:0"
  admin_tls { # <-
    cert = "%DATA%/missing.crt"
    key  = "%DATA%/missing.key"
  }
`, preflightPipeline, "Unusable TLS files", "load certificate: open"},
	{"upload prefix from the root", "", `
upload "s3" { # <-
  endpoint = "127.0.0.1:1"
  bucket   = "eddy"
  prefix   = "/devices/"
}
` + preflightPipeline, "Invalid upload", `upload: options: prefix "/devices/" starts with /`},
	{"upload CA file missing", "", `
upload "s3" { # <-
  endpoint = "127.0.0.1:1"
  bucket   = "eddy"
  ca_file  = "%DATA%/missing-ca.pem"
}
` + preflightPipeline, "Invalid upload", "upload: ca file: open"},
}

// TestValidate_ReportsWhatRunRefuses: for every configuration that run
// refuses at start for a reason in the configuration, validate reports it
// as file:line:col with the refusing component's own error and a hint, and
// run refuses it with the same diagnostic before creating data_dir.
func TestValidate_ReportsWhatRunRefuses(t *testing.T) {
	for _, tc := range preflightCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			text := strings.NewReplacer("%AGENT%", tc.agent, "%DATA%", data).Replace(preflightBase + tc.cfg)
			path := filepath.Join(dir, "eddy.hcl")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			line, col := marked(text)
			want := fmt.Sprintf("%s:%d:%d: error: %s; ", path, line, col, tc.summary)

			report, ok := Validate(path)
			if ok {
				t.Fatalf("validate accepted it:\n%s", report)
			}
			diag := lineWith(report, want)
			if diag == "" {
				t.Fatalf("validate report lacks %q:\n%s", want, report)
			}
			if !strings.Contains(diag, tc.refusedBy) {
				t.Errorf("diagnostic %q lacks the component's error %q", diag, tc.refusedBy)
			}
			if detail := strings.TrimPrefix(diag, want); !strings.Contains(strings.TrimPrefix(detail, tc.refusedBy), ". ") {
				t.Errorf("diagnostic %q has no hint after the error", diag)
			}

			// A bound against a regression that would let it run.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := Run(ctx, path, Options{Stderr: io.Discard, Stdout: io.Discard})
			if err == nil || !strings.Contains(err.Error(), diag) {
				t.Fatalf("run: %v\nwant the diagnostic %q", err, diag)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("run created data_dir before refusing (stat: %v)", err)
			}
		})
	}
}

// TestValidate_AcceptsWhatRunAccepts: every example and the nearest valid
// neighbours of the refused cases pass validate, so the checks refuse only
// what run refuses.
func TestValidate_AcceptsWhatRunAccepts(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "validate").CAFile
	for name, cfg := range map[string]string{
		"at-least-once sink over wss": `
sink "mqtt" "up" {
  broker   = "wss://127.0.0.1:1"
  topic    = "a/b"
  delivery = "at_least_once"
  qos      = 1
}
pipeline "q" {
  from = source.file.f
  to   = [sink.mqtt.up]
}`,
		"exactly-once sink over ssl with a CA file": `
sink "mqtt" "up" {
  broker = "ssl://127.0.0.1:1"
  topic  = "a/b"
  tls { ca = "` + ca + `" }
}
pipeline "q" {
  from = source.file.f
  to   = [sink.mqtt.up]
}`,
		"shared subscription": `
source "mqtt" "m" {
  broker      = "tcp://127.0.0.1:1"
  topics      = ["sensors/#"]
  connections = 2
}
pipeline "q" {
  from = source.mqtt.m
  to   = [sink.stdout.o]
}`,
		"checkpoint interval of 1ms": `
checkpoint { interval = "1ms" }
` + preflightPipeline,
		"upload": `
upload "s3" {
  endpoint = "127.0.0.1:1"
  bucket   = "eddy"
  prefix   = "devices/${device_id}/"
}
` + preflightPipeline,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".hcl")
			text := strings.NewReplacer("%AGENT%", "", "%DATA%", filepath.Join(dir, "data")).Replace(preflightBase + cfg)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if report, ok := Validate(path); !ok {
				t.Fatalf("validate refused it:\n%s", report)
			}
		})
	}
	examples, err := filepath.Glob("../examples/*.hcl")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	for _, path := range examples {
		if report, ok := Validate(path); !ok {
			t.Errorf("validate %s:\n%s", path, report)
		}
	}
}

// marked returns the line and column of the line marked "# <-" (its first
// non-blank character), or 1:1 when no line is.
func marked(text string) (line, col int) {
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "# <-") {
			return i + 1, len(l) - len(strings.TrimLeft(l, " ")) + 1
		}
	}
	return 1, 1
}

// lineWith returns the line of report that starts with prefix, or "".
func lineWith(report, prefix string) string {
	for _, l := range strings.Split(report, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestValidate_ReadsNothingInDataDir: validate builds the upload client with
// the configured device id, without reading the id data_dir recorded, so a
// data_dir of another device neither fails validate nor is touched by it
// (eddy run reports the changed id itself, with its own message). Validate
// is all that `eddy validate --no-state` runs; the state check after it
// (CheckState) reads data_dir/checkpoints and nothing else, so the device
// id stays unread there too.
func TestValidate_ReadsNothingInDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, identity.DeviceIDFile), []byte("another-device\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.hcl")
	cfg := `agent {
  device_id = "gw-1"
  data_dir  = "` + data + `"
}
source "file" "in" { path = "in.jsonl" }
sink "stdout" "out" {}
pipeline "p" {
  from = source.file.in
  key  = event.k
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.stdout.out]
}
upload "s3" {
  endpoint = "127.0.0.1:9"
  bucket   = "eddy"
}
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if report, ok := Validate(path); !ok {
		t.Fatalf("validate refused a configuration for a data_dir of another device:\n%s", report)
	}
	sc, err := CheckState(path, false)
	if err != nil || sc.Refusal != nil {
		t.Fatalf("the state check refused a data_dir of another device: %v, %v", err, sc.Refusal)
	}
	if want := "state: no checkpoint in " + data + ": every pipeline starts empty"; len(sc.Lines) != 1 || sc.Lines[0] != want {
		t.Errorf("state check says %q, want %q", sc.Lines, want)
	}
	if names, err := os.ReadDir(data); err != nil || len(names) != 1 {
		t.Errorf("data_dir after the state check: %v, %v; want only the device id", names, err)
	}
}

// TestCheckState_CreatesNoDataDir: the state check of a device that never
// ran finds no checkpoint and leaves data_dir uncreated (eddy run creates
// it, with the permissions it checks).
func TestCheckState_CreatesNoDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	path := filepath.Join(dir, "agent.hcl")
	cfg := "agent {\n  data_dir = \"" + data + "\"\n}\nsource \"file\" \"in\" { path = \"in.jsonl\" }\nsink \"stdout\" \"out\" {}\n" +
		"pipeline \"p\" {\n  from = source.file.in\n  to   = [sink.stdout.out]\n}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := CheckState(path, false)
	if err != nil || sc.Refusal != nil || len(sc.Lines) != 1 {
		t.Fatalf("CheckState: %v, %v, %q", err, sc.Refusal, sc.Lines)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the state check created data_dir: %v", err)
	}
}
