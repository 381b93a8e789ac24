//go:build linux

package disk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

// TestWatch_FullUntilSpaceFrees: a checkpoint write that fails with ENOSPC
// on a full file system (a tmpfs the test mounts) puts the store in the
// full state once — the coordinator told, Reason naming the path, one
// warning — however often it fails again; other errors change nothing.
// Poll looks at most once a second on the watch's clock, and ends the
// state, once, when twice the last checkpoint's bytes are free.
func TestWatch_FullUntilSpaceFrees(t *testing.T) {
	small := t.TempDir()
	tmpfs.Mount(t, small, "4m")
	filler := filepath.Join(small, "chk-1", "snapshot")
	if err := os.MkdirAll(filepath.Dir(filler), 0o755); err != nil {
		t.Fatal(err)
	}
	fullErr := noSpaceWrite(t, filler)
	log, lines := logLines()
	var nowMs int64 = 1000
	var told []bool
	w := NewWatch(small, log, func() int64 { return nowMs }, func(full bool) { told = append(told, full) })

	w.Note(nil)
	w.Note(&os.PathError{Op: "write", Path: filler, Err: syscall.EIO})
	if r := w.Reason(); r != "" || len(told) != 0 {
		t.Fatalf("not a full disk, yet Reason %q, coordinator told %v", r, told)
	}
	w.Note(fullErr)
	w.Note(fullErr)
	if r := w.Reason(); !strings.HasPrefix(r, filler+": ") || !strings.Contains(r, "no space left on device") {
		t.Fatalf("Reason %q does not name %s and the full disk", r, filler)
	}
	if len(told) != 1 || !told[0] {
		t.Fatalf("coordinator told %v, want [true]", told)
	}
	awaitLine(t, lines, "disk full: checkpoints wait until space frees")

	const lastBytes = 1 << 20 // the disk frees 4 MiB: twice this is back
	nowMs += 1000
	w.Poll(lastBytes)
	if w.Reason() == "" {
		t.Fatal("full state ended with the disk still full")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	nowMs += 999
	w.Poll(lastBytes)
	if w.Reason() == "" {
		t.Fatal("Poll looked again within a second")
	}
	nowMs++
	w.Poll(lastBytes)
	w.Poll(lastBytes)
	if r := w.Reason(); r != "" {
		t.Fatalf("still full after space freed: %s", r)
	}
	if len(told) != 2 || told[1] {
		t.Fatalf("coordinator told %v, want [true false]", told)
	}
	awaitLine(t, lines, "disk has room again: checkpoints resume")
	if (*Watch)(nil).Reason() != "" {
		t.Fatal("a nil Watch has a reason")
	}
}

// TestHolds_Rebuild: a state rebuild that finds its file system full
// holds StatePlace with the path, brings the endpoint up (serve) and
// tries again once space frees, then releases the hold; a failure that is
// not a full disk is returned as is, and a stop while waiting says so.
func TestHolds_Rebuild(t *testing.T) {
	small := t.TempDir()
	tmpfs.Mount(t, small, "4m")
	filler := filepath.Join(small, "state.db")
	fullErr := noSpaceWrite(t, filler)

	t.Run("waits, then rebuilds", func(t *testing.T) {
		var h Holds
		log, lines := logLines()
		tries, served := 0, 0
		rebuild := func() error {
			if tries++; tries == 1 {
				return fullErr
			}
			return nil
		}
		serve := func() error { served++; return nil }
		done := make(chan error, 1)
		go func() { done <- h.Rebuild(context.Background(), log, small, 7, rebuild, serve) }()
		awaitLine(t, lines, "disk full: the state rebuild waits until space frees")
		if r := h.Reason(StatePlace); !strings.HasPrefix(r, filler+": ") {
			t.Fatalf("hold %q does not name %s", r, filler)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		awaitLine(t, lines, "disk has room again: state rebuilt")
		if err := <-done; err != nil {
			t.Fatalf("Rebuild: %v", err)
		}
		if tries != 2 || served != 1 || h.Reason(StatePlace) != "" {
			t.Fatalf("tries %d, served %d, hold %q; want 2, 1 and none", tries, served, h.Reason(StatePlace))
		}
	})
	t.Run("other failure", func(t *testing.T) {
		var h Holds
		log, _ := logLines()
		want := errors.New("corrupt snapshot")
		err := h.Rebuild(context.Background(), log, small, 7, func() error { return want }, func() error { return nil })
		if !errors.Is(err, want) || h.Detail("") != "" {
			t.Fatalf("Rebuild = %v, detail %q; want %v and no hold", err, h.Detail(""), want)
		}
	})
	t.Run("stopped while waiting", func(t *testing.T) {
		var h Holds
		log, lines := logLines()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		noSpace := &os.PathError{Op: "write", Path: filepath.Join(small, "gone", "state.db"), Err: syscall.ENOSPC}
		go func() {
			done <- h.Rebuild(ctx, log, small, 7, func() error { return noSpace }, func() error { return nil })
		}()
		awaitLine(t, lines, "disk full: the state rebuild waits until space frees")
		cancel()
		if err := <-done; err == nil || !strings.Contains(err.Error(), "stopped while the disk was full: the state rebuild from checkpoint 7") {
			t.Fatalf("Rebuild = %v, want a stop while the disk was full", err)
		}
	})
}
