package checkpointing

import "github.com/eddy-edge/eddy/checkpoint"

// Source is a source as the Driver sees it: where barriers enter, and what
// it forwarded, which tells the Driver whether a periodic checkpoint would
// repeat the last one. Its methods are called on Run's goroutine.
type Source interface {
	// InjectBarrier hands the source barrier tr, which it forwards after
	// the last batch it forwarded before. It may block until the source
	// takes it.
	InjectBarrier(tr checkpoint.Trigger)
	// Forwarded counts what the source has forwarded (batches and ends of
	// input); it only grows.
	Forwarded() uint64
	// Ingest is the state of the source's ingest log; the zero value for a
	// source without one.
	Ingest() IngestState
}

// IngestState is a source's ingest log as pacing needs it.
type IngestState struct {
	// Full: the log refuses appends because it is full (ingest.Log.Full);
	// only a checkpoint lets it shrink.
	Full bool
	// ReadToEnd: the source has forwarded the log's last entry. Set only
	// when Full.
	ReadToEnd bool
}

// TxSink is an exactly-once sink as the Driver sees it. Its pre-commit is
// its own (it acknowledges with Driver.Send); the Driver commits. Its
// methods are called on Run's goroutine, possibly while a Write is in
// progress.
type TxSink interface {
	// Commit makes the output of epochs ≤ id visible. A sink whose commit
	// fails handles that itself (it fails the run); the Driver goes on.
	Commit(id uint64)
	// Written counts the writes the sink was given; it only grows.
	Written() uint64
	// WriteBlocked reports a Write waiting for room in a full buffer
	// (the WAL sink with when_full = "block"); checkpoints then wait for
	// the uplink instead of timing out.
	WriteBlocked() bool
}
