package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// rotateConfig is the embedded broker crash test's configuration writing
// every result to two exactly-once file sinks: "out" keeps every part,
// "kept" at most three.
func rotateConfig(brokerAddr string) string {
	return replaceAll(embeddedCrashConfig(brokerAddr), `  to = [sink.file.out]`, `  to = [sink.file.out, sink.file.kept]`,
		`sink "file" "out" {`, `sink "file" "kept" {
  path     = "%DIR%/kept"
  delivery = "exactly_once"
  rotate { max_files = 3 }
}
sink "file" "out" {`)
}

// TestFileSink_RotateKeepsNewestCommittedParts runs the binary with two
// exactly-once file sinks fed the same results at the same checkpoints
// while sensors publish, one with rotate { max_files = 3 }: after the stop
// it holds exactly the three newest committed parts of the other, byte for
// byte, and no pending or in-progress part.
func TestFileSink_RotateKeepsNewestCommittedParts(t *testing.T) {
	const readings, devices = 20_000, 100
	addr := loopback.Addr(t)
	r := newCrashRun(t, rotateConfig(addr))
	r.ready = func() bool { return healthzStatus(r.admin) == http.StatusOK }
	r.start()
	sensor, err := sendReadingsReconnecting("tcp://"+addr, "pub-rotate", readings, devices)
	if err != nil {
		t.Fatal(err)
	}
	defer sensor.close()
	r.finalResults(len(expectedWindows(readings, devices)))

	all, _ := filepath.Glob(filepath.Join(r.dir, "out", "part-*.jsonl"))
	slices.Sort(all)
	if len(all) <= 3 {
		t.Fatalf("the run committed %d parts: too few to rotate", len(all))
	}
	kept, _ := filepath.Glob(filepath.Join(r.dir, "kept", "*"))
	hidden, _ := filepath.Glob(filepath.Join(r.dir, "kept", ".*"))
	kept = append(kept, hidden...)
	slices.Sort(kept)
	newest := all[len(all)-3:]
	var want []string
	for _, p := range newest {
		want = append(want, filepath.Join(r.dir, "kept", filepath.Base(p)))
	}
	if !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want the newest three parts %v", kept, want)
	}
	for i, p := range newest {
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(kept[i])
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s", kept[i], p)
		}
	}
	t.Logf("%d parts committed, the newest 3 kept", len(all))
}
