package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate_DiskBudget: `eddy validate` refuses components' bounds that
// add up to more than max_disk, with the error on max_disk naming the sum,
// each share and the setting that lowers it, and accepts them once lowered.
func TestValidate_DiskBudget(t *testing.T) {
	const tmpl = `agent {
  device_id = "d"
  max_disk  = "1GiB"
}
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a/b"]
}
sink "mqtt" "cloud" {
  broker = "tcp://127.0.0.1:1884"
  topic  = "out"
  buffer { max_disk = "128MiB" }
}
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to   = [sink.mqtt.cloud]
}
INGEST
`
	for _, tc := range []struct {
		name, ingest string
		wantErr      string // "" = valid
	}{
		{"over", "", `:3:15: error: Disk budget exceeded; The components' own bounds add up to 2176MiB, more than max_disk = "1GiB": ingest log of source "sensors" 1GiB (ingest { max_disk }), WAL of sink "cloud" 128MiB (sink "mqtt" "cloud" { buffer { max_disk } }), state 1GiB (state { max_size })`},
		{"lowered", "ingest {\n  max_disk = \"256MiB\"\n}\nstate {\n  max_size = \"512MiB\"\n}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "eddy.hcl")
			if err := os.WriteFile(path, []byte(strings.Replace(tmpl, "INGEST", tc.ingest, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runEddy(t, "validate", "-c", path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(out, path+tc.wantErr) {
				t.Fatalf("validate: %v, want %q in:\n%s", err, path+tc.wantErr, out)
			}
		})
	}
}
