package checkpoint

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test them with errors.Is; the returned errors wrap
// them with the failed step and the file or checkpoint concerned.
var (
	// ErrCorrupt is matched (errors.Is) by every error that reports bad data
	// on disk: a checksum mismatch, a truncated or oversized file, a
	// malformed manifest, a missing snapshot file. Restore skips a checkpoint
	// whose verification fails with it; any other error is an I/O or usage
	// error and stops the restore, since retrying an older checkpoint would
	// hit the same failing device.
	ErrCorrupt = errors.New("checkpoint: corrupt")

	// ErrNoCheckpoint is returned by SelectRestore when no manifest exists or
	// none verifies; the Selection still lists what was skipped and why.
	ErrNoCheckpoint = errors.New("checkpoint: no restorable checkpoint")

	// ErrTooManyFailures is returned by Coordinator.Failed once more than
	// Config.TolerableFailures checkpoints in a row have failed.
	ErrTooManyFailures = errors.New("checkpoint: too many consecutive checkpoint failures")

	// ErrUnknownTask is returned by Coordinator.Step for a message from a task
	// that is not in Config.Tasks.
	ErrUnknownTask = errors.New("checkpoint: unknown task")

	// ErrInvalidConfig is returned by NewCoordinator for a bad Config.
	ErrInvalidConfig = errors.New("checkpoint: invalid config")

	// ErrInProgress is returned by Coordinator.Restore when a checkpoint has
	// already been triggered.
	ErrInProgress = errors.New("checkpoint: checkpoint in progress")
)

// corruptionError marks an error as a corruption (pebble's
// MarkCorruptionError): errors.Is(err, ErrCorrupt) holds and the message is
// kept as is, while Unwrap still reaches a wrapped cause.
type corruptionError struct{ err error }

func (e *corruptionError) Error() string        { return e.err.Error() }
func (e *corruptionError) Unwrap() error        { return e.err }
func (e *corruptionError) Is(target error) bool { return target == ErrCorrupt }

// IsCorruption reports whether err reports bad data on disk (it matches
// ErrCorrupt), as opposed to an I/O error.
func IsCorruption(err error) bool { return errors.Is(err, ErrCorrupt) }

// markCorrupt marks err as a corruption error; nil stays nil.
func markCorrupt(err error) error {
	if err == nil || IsCorruption(err) {
		return err
	}
	return &corruptionError{err: err}
}

// corruptf formats a corruption error; %w verbs wrap as in fmt.Errorf.
func corruptf(format string, args ...any) error {
	return &corruptionError{err: fmt.Errorf(format, args...)}
}
