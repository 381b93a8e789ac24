//go:build linux

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

// TestIngest_NoSpaceAtRollHoldsAndResumes: readings published at QoS 1 into
// the embedded broker go to an ingest log on a small file system (a tmpfs
// the test mounts) whose segments hold one reading each, so every batch
// rolls to a new segment; the file system fills up. The batches that meet
// ENOSPC are undone: the readings stay unacknowledged, the hold names the
// log's directory with "no space left on device", and once space is freed
// the same log (no restart) takes them: every reading is in the log
// exactly once, in order, and the hold is gone.
func TestIngest_NoSpaceAtRollHoldsAndResumes(t *testing.T) {
	root := t.TempDir()
	tmpfs.Mount(t, root, "1m")
	dir := filepath.Join(root, "ingest", "s")
	b, l, in := startEmbeddedIntakeIn(t, dir, time.Millisecond, broker.Options{},
		ingest.Options{SegmentBytes: ingest.MinSegmentBytes})
	holds := &disk.Holds{}
	in.mu.Lock()
	in.holds = holds
	in.mu.Unlock()
	filler := tmpfs.Fill(t, root, 48<<10) // room for about ten segments

	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sensor").
		SetAutoReconnect(false).SetMaxResumePubInFlight(256))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	const n = 100
	pad := strings.Repeat("x", 600) // two readings never share a 1 KiB segment
	payload := func(i int) string { return fmt.Sprintf(`{"seq":%d,"pad":%q}`, i, pad) }
	toks := make([]paho.Token, n)
	for i := range n {
		toks[i] = c.Publish("sensors/s1/telemetry", 1, false, payload(i))
	}
	await.True(t, 30*time.Second, `holds.Reason(disk.IngestPlace("s")) != ""`, func() bool { return holds.Reason(disk.IngestPlace("s")) != "" })
	reason := holds.Reason(disk.IngestPlace("s"))
	if !strings.HasPrefix(reason, dir+": ") || !strings.Contains(reason, "no space left on device") {
		t.Errorf("hold %q does not name %s and the full disk", reason, dir)
	}
	if toks[n-1].WaitTimeout(3 * noSpaceRetry) {
		t.Fatalf("the last reading was acknowledged with the disk full (err %v)", toks[n-1].Error())
	}
	held := l.LastOffset()
	t.Logf("%d of %d readings logged before the disk filled", held, n)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
			t.Fatalf("reading %d not acknowledged after space freed: %v", i, tok.Error())
		}
	}
	if r := holds.Reason(disk.IngestPlace("s")); r != "" {
		t.Errorf("ingest still held after space freed: %s", r)
	}
	checkLogHolds(t, l, n, payload)
}
