package ingest

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// failOrUndo handles a failed write or fsync of the batch being appended,
// which started at byte end of the active segment when the log's files held
// size bytes. When the file system is full the batch is undone (undo), so
// the log holds exactly what it held before, and ErrNoSpace is returned:
// the log stays usable. Anything else (another error, an undo that fails)
// is the log's sticky failure, as before.
func (l *Log) failOrUndo(err error, end, size int64) error {
	if !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return l.fail(err)
	}
	if uerr := l.undo(end, size); uerr != nil {
		return l.fail(errors.Join(err, fmt.Errorf("ingest: undo the batch: %w", uerr)))
	}
	return fmt.Errorf("%w: %w", ErrNoSpace, err)
}

// undo removes what the batch being appended wrote: the segments it rolled
// to (never seen by readers) and its frames in the active segment, which
// is cut back to end. Removing and truncating free blocks; they need no
// room.
//
// When the batch had rolled, the cut and the removals are made durable
// (fsync of the segment, then of the directory) before the log takes
// appends again: else a power cut could bring back a removed segment
// beside the next batch's frames, which take the same offsets — a gap or
// an overlap Open and readers would report as corruption.
func (l *Log) undo(end, size int64) error {
	rolled := l.batchRolled
	l.batchRolled = false
	for _, r := range l.rolled {
		r.f.Close()
		path := filepath.Join(l.dir, segmentName(r.first))
		if err := l.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	clear(l.rolled)
	l.rolled = l.rolled[:0]
	if err := l.active.Truncate(end); err != nil {
		return err
	}
	l.writeEnd = end
	l.size.Store(size)
	if !rolled {
		return nil
	}
	if err := l.active.Sync(); err != nil {
		return err
	}
	return l.fs.SyncDir(l.dir)
}
