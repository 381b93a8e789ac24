//go:build linux

package agent

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
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
	holds := &diskHolds{}
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
	waitForCond(t, 30*time.Second, func() bool { return holds.reason("ingest/s") != "" })
	reason := holds.reason("ingest/s")
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
	if r := holds.reason("ingest/s"); r != "" {
		t.Errorf("ingest still held after space freed: %s", r)
	}
	checkLogHolds(t, l, n, payload)
}

// noSpaceWrite writes to path until the write fails, and returns the error
// (on a full file system, /dev/full: ENOSPC, as an *fs.PathError naming
// path).
func noSpaceWrite(t *testing.T, path string) error {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4<<10)
	for range 1 << 16 {
		if _, err := f.Write(block); err != nil {
			return err
		}
	}
	t.Fatalf("%s never filled up", path)
	return nil
}

// TestShortageOf: a pipeline write that failed for lack of space is waited
// out on the file system it failed on — the file the error names, its
// nearest existing parent when it is gone, data_dir's when the error names
// none — and only when that file system is nearly full; ENOSPC from a
// device (/dev/full) or from a file system with plenty of room (a quota)
// is not a full disk, and goes to the restart strategy.
func TestShortageOf(t *testing.T) {
	small := t.TempDir()
	tmpfs.Mount(t, small, "1m")
	full := filepath.Join(small, "out", "part-1")
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	fullErr := noSpaceWrite(t, full)
	gone := filepath.Join(small, "out", "tmp", "part-2")
	roomy := t.TempDir() // the test machine's disk: far more than fullBelow free
	devFullErr := noSpaceWrite(t, "/dev/full")
	cases := []struct {
		name     string
		err      error
		dataDir  string
		wantFull bool
		wantPath string
	}{
		{"file on a full file system", wrapSinkErr(fullErr), roomy, true, full},
		{"file gone, parent full", &fs.PathError{Op: "write", Path: gone, Err: syscall.ENOSPC}, roomy, true, gone},
		{"rename onto a full file system", &os.LinkError{Op: "rename", Old: full + ".tmp", New: full, Err: syscall.ENOSPC}, roomy, true, full},
		{"quota on a full file system", &fs.PathError{Op: "write", Path: full, Err: syscall.EDQUOT}, roomy, true, full},
		{"no path: data_dir full", syscall.ENOSPC, small, true, small},
		{"no path: data_dir roomy", syscall.ENOSPC, roomy, false, ""},
		{"/dev/full", wrapSinkErr(devFullErr), small, false, ""},
		{"quota with room", &fs.PathError{Op: "write", Path: filepath.Join(roomy, "f"), Err: syscall.EDQUOT}, small, false, ""},
		{"not a full disk", &fs.PathError{Op: "write", Path: full, Err: syscall.EIO}, small, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := shortageOf(c.err, c.dataDir)
			if ok != c.wantFull || got.path != c.wantPath {
				t.Fatalf("shortageOf(%v) = %+v, %v; want path %q, %v", c.err, got, ok, c.wantPath, c.wantFull)
			}
			if ok && got.free >= fullBelow {
				t.Fatalf("full with %d bytes free", got.free)
			}
		})
	}
}

// TestWaitRegionSpace_FollowsTheFailedFileSystem: a region whose file
// sink's part failed with ENOSPC on a small file system of its own (a
// tmpfs the test mounts; data_dir has plenty of room) holds with that
// path on /readyz, and goes on once space frees there, the hold released.
func TestWaitRegionSpace_FollowsTheFailedFileSystem(t *testing.T) {
	small := t.TempDir()
	tmpfs.Mount(t, small, "1m")
	filler := filepath.Join(small, "filler")
	cause := wrapSinkErr(noSpaceWrite(t, filler))
	short, full := shortageOf(cause, t.TempDir())
	if !full {
		t.Fatalf("ENOSPC on a full tmpfs not taken for a full disk: %v", cause)
	}
	a := &Agent{log: slog.New(slog.DiscardHandler)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.waitRegionSpace(context.Background(), "sums", short, cause)
	}()
	waitForCond(t, 10*time.Second, func() bool { return a.diskHolds.reason(regionPlace("sums")) != "" })
	detail := diskFullDetail("", a.diskHolds.details())
	if !strings.Contains(detail, "pipelines/sums: "+filler+": ") || !strings.Contains(detail, "no space left on device") {
		t.Fatalf("/readyz disk detail %q does not name %s", detail, filler)
	}
	select {
	case <-done:
		t.Fatal("the region went on with its file system still full")
	default:
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the region still waits 30 s after space was freed")
	}
	if r := a.diskHolds.reason(regionPlace("sums")); r != "" {
		t.Fatalf("hold left after space freed: %s", r)
	}
}

func wrapSinkErr(err error) error { return fmt.Errorf("sink: write part: %w", err) }
