package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// signalDrainBound is how long a run stopped by a signal waits for the WAL
// sinks' backlog: SIGTERM's promise is a prompt stop, not delivery. A
// signal that comes while a run whose input ended waits for delivery
// (drain_timeout) cuts that wait to this bound too.
const signalDrainBound = 2 * time.Second

// ErrUndelivered is returned (wrapped) by Run when the input ended and
// results were still undelivered upstream after drain_timeout: they stay
// in the WAL and the next start delivers them, but the run's output is not
// all at the broker. "eddy run" exits with status 3 for it.
var ErrUndelivered = errors.New("results not delivered upstream")

// drainWALSinks waits, after the final checkpoint, until every exactly-once
// MQTT sink has delivered its committed results, each for at most its
// drain_timeout, or signalDrainBound once ctx ends (a signal, before or
// during the wait), and says what is left: results still in a WAL are
// delivered by the next start. It returns how many are left.
func (df *dataflow) drainWALSinks(ctx context.Context) int64 {
	var (
		wg   sync.WaitGroup
		left atomic.Int64
	)
	for name, h := range df.walSinks {
		s := h.s.Load()
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			wctx, cancel := context.WithTimeout(context.Background(), h.drainTimeout)
			defer cancel()
			stop := context.AfterFunc(ctx, func() {
				// Cut to the signal's bound from now, unless sooner anyway.
				t := time.AfterFunc(signalDrainBound, cancel)
				context.AfterFunc(wctx, func() { t.Stop() })
			})
			defer stop()
			if st := s.Stats(); st.BacklogMessages > 0 {
				df.log.Info("waiting for upstream delivery", "sink", name, "backlog", st.BacklogMessages,
					"drain_timeout", h.drainTimeout, "on_signal", signalDrainBound)
			}
			n, _ := s.WaitDelivered(wctx)
			if n == 0 {
				if d := time.Since(start); d > 100*time.Millisecond {
					df.log.Info("upstream delivery complete", "sink", name, "waited", d.Round(time.Millisecond))
				}
				return
			}
			left.Add(n)
			st := s.Stats()
			args := []any{"sink", name, "undelivered", n, "waited", time.Since(start).Round(time.Millisecond), "connected", st.Connected}
			if st.Refusal != "" {
				args = append(args, "refusal", st.Refusal)
			}
			df.log.Warn("results not delivered upstream yet: they stay in the WAL and the next start delivers them", args...)
		}()
	}
	wg.Wait()
	return left.Load()
}

// undeliveredError is the run's error when its input ended with n results
// undelivered upstream.
func undeliveredError(n int64) error {
	return fmt.Errorf("%w: %d results still in the WAL after drain_timeout (the next start delivers them)", ErrUndelivered, n)
}

// watchDrained returns a channel closed once every source has ended and
// forwarded its messages (file sources), polling since a region restart
// replaces what there is to wait for.
func (df *dataflow) watchDrained(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			if df.allDrained() {
				close(ch)
				return
			}
			select {
			case <-tk.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

func (df *dataflow) allDrained() bool {
	df.mu.Lock()
	defer df.mu.Unlock()
	for _, s := range df.sources {
		select {
		case <-s.drained:
		default:
			return false
		}
	}
	return true
}

// waitIdle waits, at most d, until no pipeline has queued input.
func (df *dataflow) waitIdle(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end) && !df.allIdle(); time.Sleep(20 * time.Millisecond) {
	}
}

// watchIdle returns a channel closed once no pipeline has queued input, or
// after a minute and twice the checkpoint timeout.
func (df *dataflow) watchIdle(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		end := time.Now().Add(time.Minute + 2*df.cfg.Checkpoint.Timeout)
		for time.Now().Before(end) && !df.allIdle() {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

func (df *dataflow) allIdle() bool {
	df.mu.Lock()
	defer df.mu.Unlock()
	for _, p := range df.pipelines {
		if !p.Idle() {
			return false
		}
	}
	return true
}

// waitDrained waits until every source has forwarded what it took in.
func (df *dataflow) waitDrained() {
	for !df.allDrained() {
		time.Sleep(20 * time.Millisecond)
	}
}
