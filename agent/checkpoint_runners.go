package agent

import (
	"github.com/eddy-edge/eddy/agent/checkpointing"
	"github.com/eddy-edge/eddy/checkpoint"
)

// The runners as the checkpoint driver sees them (checkpointing.Source,
// checkpointing.TxSink): a few methods, so that it never holds a runner.
var (
	_ checkpointing.Source = (*sourceRunner)(nil)
	_ checkpointing.TxSink = (*sinkRunner)(nil)
)

// InjectBarrier hands tr to run, which forwards it after the batches
// before it. ctrl is read now: a region restart replaces it (reset).
func (s *sourceRunner) InjectBarrier(tr checkpoint.Trigger) { s.ctrl <- tr }

// Forwarded counts the batches and end-of-input markers forwarded.
func (s *sourceRunner) Forwarded() uint64 { return s.sent.Load() }

// Ingest reports whether the ingest log is full and, if so, whether run
// has forwarded its last entry.
func (s *sourceRunner) Ingest() checkpointing.IngestState {
	if s.ilog == nil || !s.ilog.Full() {
		return checkpointing.IngestState{}
	}
	return checkpointing.IngestState{Full: true, ReadToEnd: s.pos.Load() >= s.ilog.LastOffset()}
}

// Commit commits the epochs ≤ id of an exactly-once sink; a failed commit
// fails the sink (and so the run).
func (r *sinkRunner) Commit(id uint64) {
	if err := r.tx.Commit(id); err != nil {
		r.fail("commit", err)
	}
}

// Written counts the writes to tx.
func (r *sinkRunner) Written() uint64 { return r.txWrites.Load() }

// budgetBlocked is a transactional sink that can wait in Write for room
// (the WAL sink with when_full = "block").
type budgetBlocked interface{ writeBlocked() bool }

// WriteBlocked reports a Write to tx waiting for room.
func (r *sinkRunner) WriteBlocked() bool {
	b, ok := r.tx.(budgetBlocked)
	return ok && b.writeBlocked()
}

// checkpointSources and checkpointTxSinks are the runners as the driver
// takes them.
func checkpointSources(srcs []*sourceRunner) []checkpointing.Source {
	out := make([]checkpointing.Source, len(srcs))
	for i, s := range srcs {
		out[i] = s
	}
	return out
}

func checkpointTxSinks(sinks []*sinkRunner) []checkpointing.TxSink {
	out := make([]checkpointing.TxSink, len(sinks))
	for i, s := range sinks {
		out[i] = s
	}
	return out
}
