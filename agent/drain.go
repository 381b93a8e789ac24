package agent

import (
	"context"
	"time"
)

// watchDrained returns a channel closed once every source has ended and
// forwarded its messages (file sources), polling since a region restart
// replaces what there is to wait for.
func (a *Agent) watchDrained(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			if a.allDrained() {
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

func (a *Agent) allDrained() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sources {
		select {
		case <-s.drained:
		default:
			return false
		}
	}
	return true
}

// waitIdle waits, at most d, until no pipeline has queued input.
func (a *Agent) waitIdle(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end) && !a.allIdle(); time.Sleep(20 * time.Millisecond) {
	}
}

// watchIdle returns a channel closed once no pipeline has queued input, or
// after a minute and twice the checkpoint timeout.
func (a *Agent) watchIdle(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		end := time.Now().Add(time.Minute + 2*a.cfg.Checkpoint.Timeout)
		for time.Now().Before(end) && !a.allIdle() {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

func (a *Agent) allIdle() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pipelines {
		if !p.idle() {
			return false
		}
	}
	return true
}

// waitDrained waits until every source has forwarded what it took in.
func (a *Agent) waitDrained() {
	for !a.allDrained() {
		time.Sleep(20 * time.Millisecond)
	}
}
