package walsink

import "errors"

var (
	// ErrClosed is returned (wrapped) by every method after Close, and by a
	// Write blocked on a full WAL when Close is called.
	ErrClosed = errors.New("walsink: closed")
	// ErrRecoverRequired is returned by Write, PreCommit and Commit when the
	// WAL holds data of epochs that were never committed and Recover has not
	// been called since Open: only the caller knows which checkpoint
	// completed.
	ErrRecoverRequired = errors.New("walsink: Recover must be called after Open")
	// ErrEpoch is returned (wrapped) for an epoch out of order: Write of an
	// epoch below the last one written, or at or below one already
	// pre-committed or committed; PreCommit below the last pre-commit.
	ErrEpoch = errors.New("walsink: epoch out of order")
	// ErrNotPreCommitted is returned (wrapped) by Commit when data of an
	// epoch ≤ the committed one was written but never pre-committed, so it
	// may not be durable.
	ErrNotPreCommitted = errors.New("walsink: epoch not pre-committed")
	// ErrMessage is returned (wrapped) by Write for a message that can never
	// be published: empty topic, topic over 65535 bytes or with wildcards,
	// or a frame over wal.MaxFrameBytes.
	ErrMessage = errors.New("walsink: invalid message")
	// ErrCorrupt is returned (wrapped) by Open when a record that passed its
	// CRC cannot be decoded, or a complete segment is damaged.
	ErrCorrupt = errors.New("walsink: corrupt WAL")

	errBadRecord = ErrCorrupt
)
