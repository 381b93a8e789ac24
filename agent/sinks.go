package agent

import (
	"log/slog"
	"sync"

	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/sink"
)

// sinkRunner owns one sink: a goroutine takes deliveries from every
// producer (window subtasks, dead letters, late readings) and writes them,
// flushing whenever it has caught up, so writes are batched under load and
// prompt when idle.
type sinkRunner struct {
	name string
	sink sink.Sink
	in   chan *operators.Delivery
	log  *slog.Logger

	producers sync.WaitGroup // producers register before sending
	done      chan struct{}
	failures  func() // counts a failed write
}

func newSinkRunner(name string, s sink.Sink, log *slog.Logger, failures func()) *sinkRunner {
	return &sinkRunner{name: name, sink: s, in: make(chan *operators.Delivery, 64), log: log,
		done: make(chan struct{}), failures: failures}
}

func (r *sinkRunner) run() {
	defer close(r.done)
	for d := range r.in {
		r.write(d)
		if len(r.in) == 0 {
			if err := r.sink.Flush(); err != nil {
				r.fail("flush", err)
			}
		}
	}
	if err := r.sink.Flush(); err != nil {
		r.fail("flush", err)
	}
	if err := r.sink.Close(); err != nil {
		r.fail("close", err)
	}
}

func (r *sinkRunner) write(d *operators.Delivery) {
	if err := r.sink.Write(d.Items()); err != nil {
		r.fail("write", err)
	}
}

func (r *sinkRunner) fail(op string, err error) {
	r.failures()
	r.log.Error("sink "+op+" failed", "sink", r.name, "err", err)
}

// closeWhenProducersDone closes the input once every registered producer
// has called producers.Done, then waits for the sink to drain.
func (r *sinkRunner) closeWhenProducersDone() {
	r.producers.Wait()
	close(r.in)
	<-r.done
}
