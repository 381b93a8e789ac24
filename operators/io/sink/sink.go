package sink

import "github.com/eddy-edge/eddy/operators/record"

// Sink delivers items to one destination.
//
// Items passed to Write, and all memory they reference, are valid only
// during the call: a sink copies what it keeps. All implementations in this
// package are safe for concurrent use, so several pipelines may share one.
// After Close, every method returns an error wrapping ErrClosed.
type Sink interface {
	// Write delivers items in order. It may buffer; a nil error means the
	// items were accepted, not that they are durable (see Flush). On error,
	// some prefix of items may have been delivered: at-least-once callers
	// retry the whole batch, and the outputs' ids let consumers drop repeats.
	Write(items []record.Item) error
	// Flush hands everything written so far to the OS or the broker (and,
	// where the sink is configured to, syncs it to stable storage).
	Flush() error
	// Close flushes, releases the destination and reports the first error.
	Close() error
}
