package agent

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// controlV1Config is the job that wrote testdata/control-v1: a control
// stream whose state holds a threshold of 20 for device a and strings with
// U+2028 and U+2029, checkpointed by the build whose manifests were format
// version 1 (the control text held those characters raw).
const controlV1Config = `
agent {
  device_id = "ctl"
  data_dir  = "%DATA%"
  admin     = "127.0.0.1:0"
}
broker { listen = "%BROKER%" }
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+"]
}
source "mqtt" "thresholds" {
  broker = "embedded"
  topics = ["control/thresholds"]
}
sink "file" "hot" { path = "%DIR%/hot.jsonl" }
pipeline "alerts" {
  from    = source.mqtt.sensors
  control = source.mqtt.thresholds
  filter  = event.temp > coalesce(control.threshold[event.device], 50)
  to      = [sink.file.hot]
}
checkpoint { interval = "100ms" }
`

// TestRestore_ControlStateFromManifestVersion1: a checkpoint of format
// version 1 restores its control state (the threshold applies to the next
// reading without being sent again), and the next checkpoint is written as
// version 2 with the same state in today's canonical text.
func TestRestore_ControlStateFromManifestVersion1(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent")
	}
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "control-v1"), filepath.Join(dir, "data"))
	brokerAddr := loopback.Addr(t)
	a := startAgent(t, dir, strings.ReplaceAll(controlV1Config, "%BROKER%", brokerAddr))
	const want = `{"list":["x\u2029y",1e-7],"note":"line\u2028separator","threshold":{"a":20}}`
	if got := string(a.pipelines[0].control.Snapshot()); got != want {
		t.Fatalf("restored control state %s, want %s", got, want)
	}

	c := connectSensor(t, brokerAddr)
	if tok := c.Publish("sensors/a", 1, false, `{"device":"a","temp":25}`); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	hot := filepath.Join(dir, "hot.jsonl")
	store := filepath.Join(dir, "data", "checkpoints")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(hot)
		m := newestManifest(t, store)
		if strings.Contains(string(b), `"temp":25`) && m != nil && m.ID > 2 {
			if m.FormatVersion != checkpoint.ManifestVersion || string(m.Extra["control/alerts"]) != want {
				t.Fatalf("checkpoint %d: format version %d, control %s; want %d, %s",
					m.ID, m.FormatVersion, m.Extra["control/alerts"], checkpoint.ManifestVersion, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30 s: hot output %q, newest manifest %+v", b, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newestManifest returns the manifest with the highest id in the store at
// root, or nil if there is none.
func newestManifest(t *testing.T, root string) *checkpoint.Manifest {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(root, "manifests", "*.json"))
	if len(paths) == 0 {
		return nil
	}
	b, err := os.ReadFile(paths[len(paths)-1]) // zero-padded ids: sorted
	if err != nil {
		t.Fatal(err)
	}
	var m checkpoint.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil // being written
	}
	return &m
}

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
