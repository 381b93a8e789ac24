package ingest

import (
	"errors"
	"fmt"
)

var (
	// ErrFull is returned by Append when the batch would take the log past
	// Options.MaxDiskBytes. Nothing was written. The caller keeps the
	// messages unacknowledged at the broker (never blocking the MQTT
	// client's handler) and retries after Truncate has freed space.
	ErrFull = errors.New("ingest: log full")

	// ErrNoSpace is returned by Append when the file system is full (ENOSPC,
	// or a quota: EDQUOT) and the batch was undone: nothing of it is in the
	// log, also when it had rolled to new segments (they are removed).
	// Like ErrFull, the log stays usable: the caller keeps the messages
	// unacknowledged and retries once space frees. (Should the undo itself
	// fail, Append fails as for any I/O error.)
	ErrNoSpace = errors.New("ingest: no space left on the file system")

	// ErrTooLarge is returned by Append when an entry cannot be stored: its
	// frame would not fit in an empty segment, or its topic is longer than
	// 65535 bytes. Nothing was written. Such a message can never be
	// ingested: dead-letter it and ack it.
	ErrTooLarge = errors.New("ingest: entry too large")

	// ErrTruncated is returned by Log.Reader, and by Reader.Next, when the
	// requested offset lies below the oldest retained segment: Truncate has
	// deleted it. Restoring an old savepoint meets this; the agent resumes
	// from FirstOffset (the live stream) and says so.
	ErrTruncated = errors.New("ingest: offset truncated")

	// ErrOutOfRange is returned by Log.Reader when the requested offset is
	// beyond LastOffset()+1: the log never held it. After a power loss in
	// AfterWrite mode the log may have lost entries a checkpoint already
	// counted; see the package documentation.
	ErrOutOfRange = errors.New("ingest: offset beyond the end of the log")

	// ErrClosed is returned by every method of a closed Log, and by Wait
	// when the Log is closed while waiting.
	ErrClosed = errors.New("ingest: log closed")

	// ErrCorrupt marks data that fails its checks anywhere but in the torn
	// tail of the last segment. Test with errors.Is(err, ErrCorrupt); the
	// details are in a *CorruptionError.
	ErrCorrupt = errors.New("ingest: corrupt log")
)

// CorruptionError says where the log is corrupt: the segment file, the byte
// position of the failing frame in it, the offset the frame should hold,
// and why it failed. errors.Is(err, ErrCorrupt) holds for it.
type CorruptionError struct {
	File   string // segment file path
	Pos    int64  // byte position of the frame in File
	Offset uint64 // log offset expected at Pos
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("ingest: corrupt segment %s at byte %d (offset %d): %s", e.File, e.Pos, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
