package ingest

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/eddy-edge/eddy/state/vfs"
)

// failOrUndo handles a failed write or fsync of a batch that started at
// byte end of the segment active. When the file system is full and the
// batch stayed in that segment, the segment is cut back to end, so the log
// holds exactly what it held before, and ErrNoSpace is returned: the log
// stays usable. Anything else (another error, a batch that rolled to a new
// segment, a cut that fails) is the log's sticky failure, as before.
func (l *Log) failOrUndo(err error, active vfs.File, end int64) error {
	if !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) || l.active != active {
		return l.fail(err)
	}
	// Truncating frees blocks; it needs no room.
	if terr := active.Truncate(end); terr != nil {
		return l.fail(errors.Join(err, fmt.Errorf("ingest: undo the batch: %w", terr)))
	}
	l.size.Add(end - l.writeEnd)
	l.writeEnd = end
	return fmt.Errorf("%w: %w", ErrNoSpace, err)
}
