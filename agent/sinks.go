package agent

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators/io/sink"
	"github.com/eddy-edge/eddy/operators/record"
)

// txSink is a sink with two-phase commit, driven by checkpoints: writes of
// epoch n become visible only after checkpoint n completes. The sink runner
// calls Write with epochs that never decrease, an epoch's writes all after
// PreCommit of the checkpoint before it; Commit comes from the
// checkpointer's goroutine, possibly while a Write is in progress.
type txSink interface {
	Write(epoch uint64, items []record.Item) error
	PreCommit(epoch uint64) error
	Commit(epoch uint64) error
	Recover(lastCompleted uint64) error
	Close() error
}

// sinkRunner owns one sink: a goroutine takes deliveries from every
// producer and writes them, flushing whenever it has caught up, so writes
// are batched under load and prompt when idle.
//
// Every sink a pipeline writes to is a checkpoint task. An at-least-once
// sink acknowledges barrier n once every producer passed it and a flush
// handed what came before to the OS or broker.
//
// A transactional sink aligns barriers across its
// producers by epoch (each delivery says which epoch it belongs to, so no
// producer is ever blocked) and pre-commits epoch n once every producer has
// passed barrier n, then acknowledges. A producer past barrier n sends
// epoch n+1 while others still send epoch n; the runner holds such early
// deliveries in memory (at most what the fastest producer emits while the
// barrier aligns) and writes them once barrier n is pre-committed, so the
// sink sees epochs in order and the data of epoch n+1 never reaches it
// before PreCommit(n).
type sinkRunner struct {
	name  string
	plain sink.Sink // at-least-once sinks
	tx    txSink    // exactly-once sinks
	in    chan stages.SinkMsg
	log   *slog.Logger

	producers  sync.WaitGroup // producers register before sending
	nProducers int
	arrived    map[uint64]int   // barrier id → producers past it, until all are
	held       []stages.SinkMsg // early deliveries, in arrival order
	ckpt       checkpointSender

	done     chan struct{}
	failures func()      // counts a failed write
	fatal    func(error) // a transactional sink that fails fails its region
	// deadLetters: the sink takes a pipeline's dead letters, so a failed
	// write is a record that could not even be dead-lettered, which fails
	// the region like a transactional sink's failure.
	deadLetters bool
	// maxPayload: results larger than this many bytes never reach the
	// sink; their pipeline dead-letters them. 0 = no limit.
	maxPayload int
	// packetLimit, set for an MQTT 5 sink through its WAL, reports a
	// result whose PUBLISH is over the Maximum Packet Size its broker
	// announced: its pipeline dead-letters it like one over maxPayload.
	packetLimit func(record.Item) (size, limit int64, over bool)

	txWrites atomic.Uint64 // writes to tx: the checkpointer does not skip while it moves
}

// checkpointSender takes a task's answers to barriers
// (*checkpointing.Driver).
type checkpointSender interface {
	Send(checkpoint.Message)
}

func newSinkRunner(name string, log *slog.Logger, failures func()) *sinkRunner {
	return &sinkRunner{name: name, in: make(chan stages.SinkMsg, 64), log: log,
		arrived: map[uint64]int{}, done: make(chan struct{}), failures: failures}
}

func (r *sinkRunner) taskID() string { return "sink/" + r.name }

// isTask reports whether the sink acknowledges checkpoints. Every sink a
// pipeline writes to is one: a transactional sink once it pre-committed,
// an at-least-once sink once it flushed what came before the barrier, so
// no checkpoint completes over results that a failed flush lost (its
// restart would not replay them). A sink no pipeline writes to sees no
// barrier, so it is none.
func (r *sinkRunner) isTask() bool { return r.tx != nil || r.nProducers > 0 }

// port is the sink as the pipelines' stages write it.
func (r *sinkRunner) port() stages.Sink {
	return stages.Sink{Name: r.name, In: r.in, MaxPayload: r.maxPayload, PacketLimit: r.packetLimit, Done: r.producers.Done}
}

// addProducers registers n producers that will each call producers.Done.
func (r *sinkRunner) addProducers(n int) {
	r.producers.Add(n)
	r.nProducers += n
}

func (r *sinkRunner) run() {
	defer close(r.done)
	for m := range r.in {
		if m.Barrier != 0 {
			r.onBarrier(m.Barrier)
			continue
		}
		if r.tx != nil {
			r.txWrites.Add(1) // output to commit: the next checkpoint is not skipped
			if r.early(m.Epoch) {
				r.held = append(r.held, m)
				continue
			}
			r.writeTx(m)
			continue
		}
		if err := r.plain.Write(m.Delivery.Items()); err != nil {
			r.fail("write", err)
		}
		if len(r.in) == 0 {
			if err := r.plain.Flush(); err != nil {
				r.fail("flush", err)
			}
		}
	}
	var err error
	if r.plain != nil {
		if err = r.plain.Flush(); err != nil {
			r.fail("flush", err)
		}
		err = r.plain.Close()
	} else {
		// Deliveries still held belong to a barrier that never aligned (a
		// producer ended before it): written like any uncommitted epoch,
		// Recover discards them at the next start.
		for _, m := range r.held {
			r.writeTx(m)
		}
		r.held = nil
		err = r.tx.Close()
	}
	if err != nil {
		r.fail("close", err)
	}
}

// early reports whether a delivery of epoch is ahead of the alignment: its
// producer passed barrier epoch-1 and another has not yet. Barriers align in
// order (every producer sends them in order), so when barrier epoch-1 has
// aligned every earlier one has too.
func (r *sinkRunner) early(epoch uint64) bool {
	if epoch == 0 {
		return false
	}
	_, aligning := r.arrived[epoch-1]
	return aligning
}

func (r *sinkRunner) writeTx(m stages.SinkMsg) {
	if err := r.tx.Write(m.Epoch, m.Delivery.Items()); err != nil {
		r.fail("write", err)
	}
}

// writeHeld writes the held deliveries that are no longer early, in arrival
// order, and keeps the rest.
func (r *sinkRunner) writeHeld() {
	keep := r.held[:0]
	for _, m := range r.held {
		if r.early(m.Epoch) {
			keep = append(keep, m)
			continue
		}
		r.writeTx(m)
	}
	clear(r.held[len(keep):])
	r.held = keep
}

func (r *sinkRunner) onBarrier(id uint64) {
	r.arrived[id]++
	if r.arrived[id] < r.nProducers {
		return
	}
	delete(r.arrived, id)
	if r.tx == nil {
		// What came before the barrier goes to the OS or broker before
		// the checkpoint may complete. A sink broken by an earlier failed
		// write fails here too, so that checkpoint is aborted.
		if err := r.plain.Flush(); err != nil {
			r.fail("flush", err)
			r.report(checkpoint.Failure{CheckpointID: id, Task: r.taskID(), Err: err})
			return
		}
		r.report(checkpoint.Ack{CheckpointID: id, Task: r.taskID()})
		return
	}
	// The held deliveries of epoch id+1 are written after the pre-commit
	// (even a failed one: the run stops then, and they are uncommitted).
	defer r.writeHeld()
	if err := r.tx.PreCommit(id); err != nil {
		r.fail("pre-commit", err)
		r.report(checkpoint.Failure{CheckpointID: id, Task: r.taskID(), Err: err})
		return
	}
	r.report(checkpoint.Ack{CheckpointID: id, Task: r.taskID()})
}

// report sends the sink's answer to a barrier to the checkpointer, if it
// has one.
func (r *sinkRunner) report(m checkpoint.Message) {
	if r.ckpt != nil {
		r.ckpt.Send(m)
	}
}

func (r *sinkRunner) fail(op string, err error) {
	r.failures()
	r.log.Error("sink "+op+" failed", "sink", r.name, "err", err)
	// An exactly-once sink that cannot write cannot keep its promise: the
	// run stops and restarts from the last checkpoint (restart strategy).
	// At-least-once sinks retry with the next batch; an uplink that is down
	// is normal at the edge. A full disk under an at-least-once file sink
	// is not retried that way: the file sink is broken after a failed
	// write, and what it lost (a torn line among it) is written again only
	// by a restart from the last checkpoint, once the region has waited
	// for space. The file is then cut back to its last whole line.
	if (r.tx != nil || r.deadLetters || disk.IsNoSpace(err)) && r.fatal != nil {
		r.fatal(fmt.Errorf("sink %q: %s: %w", r.name, op, err))
	}
}

// closeWhenProducersDone closes the input once every registered producer
// has called producers.Done, then waits for the sink to drain.
func (r *sinkRunner) closeWhenProducersDone() {
	r.producers.Wait()
	close(r.in)
	<-r.done
}
