//go:build linux

package disk

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

	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

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
			got, ok := ShortageOf(c.err, c.dataDir)
			if ok != c.wantFull || got.path != c.wantPath {
				t.Fatalf("ShortageOf(%v) = %+v, %v; want path %q, %v", c.err, got, ok, c.wantPath, c.wantFull)
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
	short, full := ShortageOf(cause, t.TempDir())
	if !full {
		t.Fatalf("ENOSPC on a full tmpfs not taken for a full disk: %v", cause)
	}
	var holds Holds
	log, lines := logLines()
	done := make(chan struct{})
	go func() {
		defer close(done)
		holds.WaitRegion(context.Background(), log, "sums", short, cause)
	}()
	// The hold is taken before the line that says so is logged.
	awaitLine(t, lines, "disk full: pipelines wait until space frees")
	detail := holds.Detail("")
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
	if r := holds.Reason(RegionPlace("sums")); r != "" {
		t.Fatalf("hold left after space freed: %s", r)
	}
}

func wrapSinkErr(err error) error { return fmt.Errorf("sink: write part: %w", err) }

// logLines returns a logger and the lines it logs, as they are logged (up
// to 1,024 not yet read; a test reads them with awaitLine).
func logLines() (*slog.Logger, <-chan string) {
	ch := make(chan string, 1024)
	return slog.New(slog.NewTextHandler(lineWriter(ch), nil)), ch
}

// lineWriter hands each write (a log line) to its channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// awaitLine reads lines until one contains want, and returns it; it fails
// the test when none does within 10 s, saying which line came last.
func awaitLine(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	last := "(none)"
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, want) {
				return l
			}
			last = l
		case <-timeout:
			t.Fatalf("no line says %q within 10 s; the last was %s", want, last)
		}
	}
}
