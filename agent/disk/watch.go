package disk

import (
	"log/slog"
	"sync/atomic"
)

// Watch is the full-disk state of the checkpoint store, whose writes
// (snapshot files, merges, manifests) fail whole and are taken again by a
// later checkpoint: Note enters the state when a write fails for lack of
// space, Poll ends it once space frees. Note and Poll must be called from
// one goroutine (the checkpoint coordinator's); Reason is safe for
// concurrent use.
type Watch struct {
	dir string // the store's directory, for an error that names no path
	log *slog.Logger
	// nowMs is a monotonic clock in milliseconds, for Poll's pacing.
	nowMs func() int64
	// setFull tells the coordinator that the state began (true) or ended
	// (false), before the line that says so is logged.
	setFull func(full bool)

	reason atomic.Pointer[string] // the error that said so, while full
	// path is the path the last no-space error named (dir when it named
	// none), freeAtFull the free bytes of its file system then, and
	// polledMs when free space was last looked at.
	path       string
	freeAtFull int64
	polledMs   int64
}

// NewWatch returns the full-disk state of the store in dir, not full.
// setFull is called with true each time the state begins and with false
// each time it ends, never twice in a row with the same value: it is how
// the checkpoint coordinator learns that failures stop counting and
// periodic checkpoints pause meanwhile.
func NewWatch(dir string, log *slog.Logger, nowMs func() int64, setFull func(full bool)) *Watch {
	return &Watch{dir: dir, log: log, nowMs: nowMs, setFull: setFull}
}

// Note, if err says the disk is full (ENOSPC, or a quota: EDQUOT), enters
// the full state (setFull(true), Reason says why, one warning) unless in
// it already. Each such err, also in the full state, becomes the one Poll
// measures against: its path's free space now, and Poll's next look a
// second later. Any other err, nil included, changes nothing.
func (w *Watch) Note(err error) {
	if err == nil || !IsNoSpace(err) {
		return
	}
	w.path = failedPath(err)
	if w.path == "" {
		w.path = w.dir
	}
	w.freeAtFull, _ = freeNear(w.path)
	w.polledMs = w.nowMs()
	if w.reason.Load() != nil {
		return
	}
	msg := w.path + ": " + err.Error()
	w.reason.Store(&msg)
	w.setFull(true)
	w.log.Warn("disk full: checkpoints wait until space frees (they do not count as failures meanwhile)",
		"path", w.path, "free_bytes", w.freeAtFull, "err", err)
}

// Poll, in the full state, looks at most once a second at the free space
// of the file system that was full (the last noted error's path) and ends
// the state (setFull(false), Reason "", one line) when enough came back:
// twice lastBytes (the last checkpoint's size), or 1 MiB more than when
// it filled up. A checkpoint that fails again for lack of space starts it
// over (Note), uncounted. Outside the full state it does nothing, and is
// cheap enough to call on every tick.
func (w *Watch) Poll(lastBytes int64) {
	if w.reason.Load() == nil {
		return
	}
	now := w.nowMs()
	if now-w.polledMs < 1000 {
		return
	}
	w.polledMs = now
	free, err := freeNear(w.path)
	if err != nil || (free < 2*lastBytes && free < w.freeAtFull+minFreed) {
		return
	}
	w.reason.Store(nil)
	w.setFull(false)
	w.log.Info("disk has room again: checkpoints resume", "path", w.path, "free_bytes", free)
}

// Reason returns why the disk counts as full (the path and the error that
// said so), or "" when it does not; "" on a nil Watch (checkpoints not set
// up).
func (w *Watch) Reason() string {
	if w == nil {
		return ""
	}
	if p := w.reason.Load(); p != nil {
		return *p
	}
	return ""
}
