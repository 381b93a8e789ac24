package state

import "errors"

var (
	// ErrFull is returned (wrapped, with the sizes) when the working bbolt
	// file reached BoltOptions.MaxSize. The state is then unusable until
	// restored: raise state.max_size, or reduce the key count, the window
	// size or allowed lateness.
	ErrFull = errors.New("state store full")
	// ErrClosed is returned by calls on a closed Backend.
	ErrClosed = errors.New("state: backend closed")
	// ErrCorrupt is returned (wrapped) when stored or restored bytes cannot
	// be decoded.
	ErrCorrupt = errors.New("state: corrupt encoding")
	// ErrUnknownBucket is returned (wrapped) by a key-group-filtered Restore
	// meeting a bucket that was not registered with Backend.Bucket.
	ErrUnknownBucket = errors.New("state: unknown bucket")
)
