package agent

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/operators/io/source"
)

// sourceRunner runs one source and fans its batches out to its pipelines.
// Barriers enter through inject and leave in-band after the last batch
// forwarded, with the source's position at that point: exactly the
// messages before the barrier are in the checkpoint (Chandy–Lamport).
type sourceRunner struct {
	name string
	src  source.Source
	outs []chan<- *stages.SourceBatch

	ctrl chan checkpoint.Trigger // barriers to inject; closed to finish
	acks func(checkpoint.Message)
	// replayable sources (files) restart from their beginning, so a
	// restored position skips what the checkpoint holds.
	replayable bool
	skipTo     uint64        // restored position: messages at or below it were processed
	pos        atomic.Uint64 // offset of the last message forwarded; atomic for the ingest-lag gauge
	// ilog is the ingest log of a source that cannot replay (MQTT, the
	// embedded broker): intake appends to it, run reads from it. The intake
	// runs for the life of the agent (startIntake); a restarted failover
	// region only starts a new reader at its restored position.
	ilog       *ingest.Log
	topics     topicInterner // topics read from ilog
	arenaHint  int           // payload bytes of the last batch read from ilog
	batchHint  int           // messages in that batch
	intake     func(ctx context.Context)
	intakeDone chan struct{} // closed when intake has returned
	eof        atomic.Bool
	// sent counts the batches and end-of-input markers forwarded: the
	// checkpointer skips a periodic checkpoint while no count moved.
	sent    atomic.Uint64
	err     error
	drained chan struct{} // closed once the source has stopped and its messages are forwarded
	// reopen, for a source read by run itself (a file), returns a fresh
	// source reading from the start, for a region restart.
	reopen  func() source.Source
	cancel  context.CancelFunc // ends this generation's reading
	done    chan struct{}      // closed when run returns
	stopped bool               // by stop, until reset: ctrl is closed
}

func newSourceRunner(name string, src source.Source) *sourceRunner {
	return &sourceRunner{name: name, src: src, ctrl: make(chan checkpoint.Trigger, 1), drained: make(chan struct{}),
		intakeDone: make(chan struct{}), done: make(chan struct{})}
}

// startIntake runs the intake of an ingest-log source until ctx ends.
func (s *sourceRunner) startIntake(ctx context.Context) {
	if s.intake == nil {
		close(s.intakeDone)
		return
	}
	go func() { s.intake(ctx); close(s.intakeDone) }()
}

// start runs a generation of the runner under a context of its own.
func (s *sourceRunner) start(ctx context.Context, log *slog.Logger, wg *sync.WaitGroup) {
	ctx, s.cancel = context.WithCancel(ctx)
	wg.Add(1)
	go func() { defer wg.Done(); s.run(ctx, log) }()
}

// stop ends a running generation without draining: its outputs close,
// and what they held is abandoned (a restarting region replays it).
func (s *sourceRunner) stop() {
	close(s.ctrl)
	s.cancel()
	<-s.done
	s.stopped = true
	select {
	case <-s.drained:
	default:
		close(s.drained) // run has returned: nothing more will be forwarded
	}
}

// reset prepares a stopped runner (run has returned) for a new generation
// after a region restart: no outputs (the new pipelines register again), a
// new barrier channel, and the position set by the restore that follows.
func (s *sourceRunner) reset() {
	s.outs = nil
	s.ctrl = make(chan checkpoint.Trigger, 1)
	s.drained = make(chan struct{})
	s.done = make(chan struct{})
	s.skipTo, s.err, s.stopped = 0, nil, false
	s.pos.Store(0)
	s.eof.Store(false)
	if s.reopen != nil {
		s.src = s.reopen()
	}
}

func (s *sourceRunner) taskID() string { return sourceTaskID(s.name) }

func sourceTaskID(name string) string { return "source/" + name }

// ingestLag counts the readings in the ingest log that the pipelines have
// not been handed yet: the backlog a slow pipeline or a restart leaves.
// Safe to call from any goroutine.
func (s *sourceRunner) ingestLag() uint64 {
	last, pos := s.ilog.LastOffset(), s.pos.Load()
	if last <= pos {
		return 0
	}
	return last - pos
}

// run reads the source until ctx ends or input ends, then keeps serving
// barriers until ctrl is closed, and finally closes its outputs.
func (s *sourceRunner) run(ctx context.Context, log *slog.Logger) {
	defer close(s.done)
	if s.ilog != nil {
		s.readLog(ctx, log)
		return
	}
	ch := make(chan []source.Message, 16)
	go func() {
		err := s.src.Run(ctx, ch)
		if err != nil && ctx.Err() == nil {
			s.err = err
			log.Error("source stopped", "source", s.name, "err", err)
		} else if err == nil && ctx.Err() == nil {
			s.eof.Store(true)
		}
		close(ch)
	}()
	in := ch
	for {
		select {
		case msgs, ok := <-in:
			if !ok {
				in = nil
				if s.eof.Load() {
					s.send(&stages.SourceBatch{EOI: true})
				}
				close(s.drained)
				continue
			}
			s.forward(msgs)
		case tr, ok := <-s.ctrl:
			if !ok {
				s.closeOuts()
				// Stopped before the end (a region restart): wait for the
				// reader, cancelled too, so nothing of this generation
				// outlives it.
				if in != nil {
					for range in {
					}
				}
				return
			}
			s.inject(tr)
		}
	}
}

// inject sends barrier tr after everything forwarded so far and
// acknowledges it with the source's position.
func (s *sourceRunner) inject(tr checkpoint.Trigger) {
	if s.ilog != nil {
		// In after_write mode the log's tail may not be on disk yet; the
		// checkpoint must not point past what survives power loss.
		if err := s.ilog.Sync(); err != nil && s.acks != nil {
			s.acks(checkpoint.Failure{CheckpointID: tr.ID, Task: s.taskID(), Err: err})
			return
		}
	}
	s.send(&stages.SourceBatch{Barrier: &tr})
	if s.acks != nil {
		s.acks(checkpoint.Ack{CheckpointID: tr.ID, Task: s.taskID(),
			Positions: map[string]uint64{s.name: s.pos.Load()}})
	}
}

func (s *sourceRunner) closeOuts() {
	for _, o := range s.outs {
		close(o)
	}
}

// serveBarriersUntilClosed keeps a stopped source answering barriers, so
// checkpoints of the other sources still complete.
func (s *sourceRunner) serveBarriersUntilClosed() {
	for tr := range s.ctrl {
		s.inject(tr)
	}
	s.closeOuts()
}

func (s *sourceRunner) forward(msgs []source.Message) {
	// After a restore, a replayable source (a file) starts from its
	// beginning: drop what the checkpoint already holds.
	if s.skipTo > 0 {
		n := 0
		for i := range msgs {
			if msgs[i].Offset > s.skipTo {
				msgs[n] = msgs[i]
				n++
			} else {
				msgs[i].Ack()
			}
		}
		msgs = msgs[:n]
		if n == 0 {
			return
		}
	}
	s.pos.Store(msgs[len(msgs)-1].Offset)
	rb := &stages.SourceBatch{Msgs: msgs}
	rb.Share(len(s.outs))
	s.send(rb)
}

func (s *sourceRunner) send(rb *stages.SourceBatch) {
	if rb.Barrier == nil && !rb.CaughtUp {
		s.sent.Add(1)
	}
	for _, o := range s.outs {
		o <- rb // pipelines drain until their input closes: never blocks forever
	}
}
