package config

import (
	"reflect"
	"strings"
	"testing"
)

// budgetBase has one MQTT source (an ingest log), one exactly_once MQTT
// sink (a WAL) and a windowed pipeline (bbolt state); max_disk is on line 2.
const budgetBase = `agent {
  max_disk = %MAX%
}
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a/b"]
}
sink "mqtt" "cloud" {
  broker = "tcp://127.0.0.1:1884"
  topic  = "out"
%BUFFER%
}
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to   = [sink.mqtt.cloud]
}
%EXTRA%
`

func budgetSrc(maxDisk, buffer, extra string) string {
	return strings.NewReplacer("%MAX%", maxDisk, "%BUFFER%", buffer, "%EXTRA%", extra).Replace(budgetBase)
}

func TestParse_DiskBudget(t *testing.T) {
	tests := []struct {
		name                  string
		maxDisk, buffer, more string
		// wantErr is a substring of the error at 2:14 ("" = no error).
		wantErr   string
		wantShare int64
	}{
		{name: "defaults fit", maxDisk: `"4GiB"`, wantShare: 1<<30 + 512<<20 + 1<<30},
		{name: "exactly the sum", maxDisk: `"2560MiB"`, wantShare: 2560 << 20},
		{name: "defaults over the budget", maxDisk: `"2GiB"`,
			wantErr: `Disk budget exceeded; The components' own bounds add up to 2560MiB, more than max_disk = "2GiB": ingest log of source "sensors" 1GiB (ingest { max_disk }), WAL of sink "cloud" 512MiB (sink "mqtt" "cloud" { buffer { max_disk } }), state 1GiB (state { max_size }). Checkpoints and file sinks need room besides. Lower the largest of these, or raise max_disk to at least "2560MiB".`},
		{name: "lowered shares fit", maxDisk: `"1GiB"`, buffer: `  buffer { max_disk = "128MiB" }`,
			more: "ingest {\n  max_disk = \"256MiB\"\n}\nstate {\n  max_size = \"512MiB\"\n}", wantShare: 896 << 20},
		{name: "a raised WAL over the budget", maxDisk: `"3GiB"`, buffer: `  buffer { max_disk = "2GiB" }`,
			wantErr: `WAL of sink "cloud" 2GiB`},
		{name: "memory state takes no disk", maxDisk: `"1536MiB"`, more: "state {\n  backend = \"memory\"\n}", wantShare: 1536 << 20},
		{name: "below 1MiB", maxDisk: `"512KiB"`, wantErr: `Value out of range; "max_disk" must be at least 1MiB`},
		{name: "not a size", maxDisk: `"lots"`, wantErr: `Invalid size; "lots" is not a size`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(budgetSrc(tt.maxDisk, tt.buffer, tt.more)), "test.hcl")
			if tt.wantErr == "" {
				if diags.HasErrors() {
					t.Fatalf("Parse:\n%s", FormatDiagnostics(diags))
				}
				if got := DiskSharesTotal(cfg.DiskShares()); got != tt.wantShare {
					t.Errorf("shares add up to %d, want %d", got, tt.wantShare)
				}
				return
			}
			out := FormatDiagnostics(diags)
			for _, line := range strings.Split(out, "\n") {
				if cfg == nil && strings.HasPrefix(line, "test.hcl:2:14: error: ") && strings.Contains(line, tt.wantErr) {
					return
				}
			}
			t.Errorf("want at 2:14 %q, got:\n%s", tt.wantErr, out)
		})
	}
}

func TestDiskShares(t *testing.T) {
	cfg := mustParse(t, `source "mqtt" "a" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a"]
}
source "file" "f" { path = "in.jsonl" }
source "simulator" "sim" {
  broker  = "tcp://127.0.0.1:1883"
  topic   = "sim/${sensor}/t"
  devices = 2
  rate    = 1
}
sink "mqtt" "eo" {
  broker = "tcp://127.0.0.1:1883"
  topic  = "x"
}
sink "mqtt" "alo" {
  broker   = "tcp://127.0.0.1:1883"
  topic    = "y"
  delivery = "at_least_once"
  qos      = 1
}
sink "file" "out" { path = "out.jsonl" }
pipeline "p1" {
  from = source.mqtt.a
  to   = [sink.mqtt.eo, sink.mqtt.alo]
}
pipeline "p2" {
  from = source.file.f
  to   = [sink.mqtt.eo, sink.file.out]
}
pipeline "p3" {
  from = source.simulator.sim
  to   = [sink.file.out]
}
`, noEnv)
	want := []DiskShare{
		{Component: DiskIngest, Name: "a", Bytes: 1 << 30, Setting: "ingest { max_disk }"},
		{Component: DiskWAL, Name: "eo", Bytes: 512 << 20, Setting: `sink "mqtt" "eo" { buffer { max_disk } }`},
		{Component: DiskIngest, Name: "sim", Bytes: 1 << 30, Setting: "ingest { max_disk }"},
	}
	if got := cfg.DiskShares(); !reflect.DeepEqual(got, want) {
		t.Errorf("DiskShares (no window, so no state) =\n%+v\nwant\n%+v", got, want)
	}
	if cfg.Agent.MaxDiskBytes != 0 {
		t.Errorf("MaxDiskBytes = %d, want 0 (derived at start)", cfg.Agent.MaxDiskBytes)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1000: "1000", 4096: "4KiB", 1536 << 20: "1536MiB", 4 << 30: "4GiB", 1 << 40: "1TiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if n != 0 {
			if back, err := parseSize(FormatSize(n)); err != nil || back != n {
				t.Errorf("parseSize(FormatSize(%d)) = %d, %v", n, back, err)
			}
		}
	}
}
