package agent

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/sink"
)

// sinkMsg is what producers (window subtasks, prepare stages) send a sink:
// a delivery belonging to an epoch, or the news that the producer passed
// checkpoint barrier `barrier`.
type sinkMsg struct {
	d       *operators.Delivery
	epoch   uint64
	barrier uint64
}

// txSink is a sink with two-phase commit, driven by checkpoints: writes of
// epoch n become visible only after checkpoint n completes.
type txSink interface {
	Write(epoch uint64, items []sink.Item) error
	PreCommit(epoch uint64) error
	Commit(epoch uint64) error
	Recover(lastCompleted uint64) error
	Close() error
}

// sinkRunner owns one sink: a goroutine takes deliveries from every
// producer and writes them, flushing whenever it has caught up, so writes
// are batched under load and prompt when idle.
//
// A transactional sink is a checkpoint task: it aligns barriers across its
// producers by epoch (each delivery says which epoch it belongs to, so no
// producer is ever blocked) and pre-commits epoch n once every producer has
// passed barrier n, then acknowledges.
type sinkRunner struct {
	name  string
	plain sink.Sink // at-least-once sinks
	tx    txSink    // exactly-once sinks
	in    chan sinkMsg
	log   *slog.Logger

	producers  sync.WaitGroup // producers register before sending
	nProducers int
	arrived    map[uint64]int
	ckpt       *checkpointer

	done     chan struct{}
	failures func()      // counts a failed write
	fatal    func(error) // a transactional sink that fails stops the run

	txWrites atomic.Uint64 // writes to tx: the checkpointer does not skip while it moves
}

func newSinkRunner(name string, log *slog.Logger, failures func()) *sinkRunner {
	return &sinkRunner{name: name, in: make(chan sinkMsg, 64), log: log,
		arrived: map[uint64]int{}, done: make(chan struct{}), failures: failures}
}

func (r *sinkRunner) taskID() string { return "sink/" + r.name }

// addProducers registers n producers that will each call producers.Done.
func (r *sinkRunner) addProducers(n int) {
	r.producers.Add(n)
	r.nProducers += n
}

func (r *sinkRunner) run() {
	defer close(r.done)
	for m := range r.in {
		if m.barrier != 0 {
			r.onBarrier(m.barrier)
			continue
		}
		items := m.d.Items()
		var err error
		if r.tx != nil {
			r.txWrites.Add(1) // output to commit: the next checkpoint is not skipped
			err = r.tx.Write(m.epoch, items)
		} else {
			err = r.plain.Write(items)
		}
		if err != nil {
			r.fail("write", err)
		}
		if len(r.in) == 0 && r.plain != nil {
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
		err = r.tx.Close()
	}
	if err != nil {
		r.fail("close", err)
	}
}

func (r *sinkRunner) onBarrier(id uint64) {
	r.arrived[id]++
	if r.arrived[id] < r.nProducers {
		return
	}
	delete(r.arrived, id)
	if r.tx == nil {
		// At-least-once sinks are not checkpoint tasks; a barrier is a
		// good moment to hand what they have to the OS or broker.
		if err := r.plain.Flush(); err != nil {
			r.fail("flush", err)
		}
		return
	}
	if err := r.tx.PreCommit(id); err != nil {
		r.fail("pre-commit", err)
		if r.ckpt != nil {
			r.ckpt.send(checkpoint.Failure{CheckpointID: id, Task: r.taskID(), Err: err})
		}
		return
	}
	if r.ckpt != nil {
		r.ckpt.send(checkpoint.Ack{CheckpointID: id, Task: r.taskID()})
	}
}

func (r *sinkRunner) fail(op string, err error) {
	r.failures()
	r.log.Error("sink "+op+" failed", "sink", r.name, "err", err)
	// An exactly-once sink that cannot write cannot keep its promise: the
	// run stops and restarts from the last checkpoint (restart strategy).
	// At-least-once sinks retry with the next batch; an uplink that is down
	// is normal at the edge.
	if r.tx != nil && r.fatal != nil {
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
