package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestMQTTSink_ResultsOverMaxPayloadDeadLettered: results larger than the
// sink's max_payload (one device's, whose key is 2,000 bytes long) are never
// published: the run still delivers every other result and exits 0, and
// each oversized one is in the pipeline's dead-letter file, whole, with
// reason too_large.
func TestMQTTSink_ResultsOverMaxPayloadDeadLettered(t *testing.T) {
	up := mosquitto.Start(t, mosquitto.DefaultInflight())
	col := newCollector(t, up.URL(), "results/#")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	const windows = 4
	want := writeWindowReadings(t, in, 3, windows)
	// dev-0 becomes the device with the long key; its windows are the
	// oversized results.
	bigKey := "big-" + strings.Repeat("k", 2000)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte(strings.ReplaceAll(string(b), `"device":"dev-0"`, `"device":"`+bigKey+`"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if strings.HasPrefix(k, "dev-0/") {
			delete(want, k)
		}
	}
	cfg := replaceAll(drainConfig,
		"  to = [sink.mqtt.cloud]\n}", "  to = [sink.mqtt.cloud]\n  dead_letter = sink.file.dead\n}\nsink \"file\" \"dead\" { path = \"%DIR%/dead.jsonl\" }")
	out, err := runEddy(t, "run", "-c", writeConfig(t, dir, cfg, "%UPSTREAM%", up.URL(), "%SINK%", "\n  max_payload = \"1KiB\""))
	if err != nil {
		t.Fatalf("eddy run: %v\n%s", err, out)
	}
	if strings.Contains(out, "not delivered upstream") {
		t.Errorf("the run reported undelivered results:\n%s", out)
	}
	await.True(t, 30*time.Second, `col.windowCount("drain") >= len(want)`, func() bool { return col.windowCount("drain") >= len(want) })
	got := col.windows("drain")
	if diff := differingWindows(t, want, got); diff > 0 || len(got) != len(want) {
		t.Errorf("%d of %d windows differ; %d delivered", diff, len(want), len(got))
	}

	f, err := os.Open(filepath.Join(dir, "dead.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	dead := 0
	for sc.Scan() {
		var dl struct{ Pipeline, Reason, Detail, Payload string }
		if err := json.Unmarshal(sc.Bytes(), &dl); err != nil {
			t.Fatalf("dead letter %q: %v", sc.Text(), err)
		}
		var res struct{ Key string }
		if dl.Reason != "too_large" || !strings.Contains(dl.Detail, `max_payload (1024 bytes) of sink "cloud"`) ||
			json.Unmarshal([]byte(dl.Payload), &res) != nil || res.Key != bigKey {
			t.Errorf("dead letter %.300q: want reason too_large, the limit and the sink, and the whole result", sc.Text())
		}
		dead++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if dead != windows {
		t.Errorf("%d dead letters, want %d (one per oversized window)", dead, windows)
	}
}
