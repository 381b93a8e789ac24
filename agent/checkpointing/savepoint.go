package checkpointing

import (
	"context"
	"fmt"

	"github.com/eddy-edge/eddy/agent/admin"
)

func (c *Driver) answer(req uint64, err error) {
	if req == 0 {
		return
	}
	c.mu.Lock()
	ch := c.waiters[req]
	delete(c.waiters, req)
	c.mu.Unlock()
	if ch != nil {
		ch <- err
	}
}

// savepointRequest and forceCheckpoint travel on msgs to the run goroutine.
type savepointRequest struct {
	id   uint64
	done chan error
}

// ErrTooManySavepoints refuses a savepoint when max_savepoints are kept.
var ErrTooManySavepoints = admin.ErrTooManySavepoints

// Savepoint takes a savepoint and waits for it: a full checkpoint that
// retention never deletes. It returns the savepoint's id, the savepoint's
// abort, or ctx's error. With max_savepoints kept already it is refused
// with ErrTooManySavepoints; requests are taken one at a time, so
// concurrent ones cannot pass the limit together. Safe for concurrent use;
// only a running Run answers.
func (c *Driver) Savepoint(ctx context.Context) (uint64, error) {
	c.savepointSlots.Lock()
	defer c.savepointSlots.Unlock()
	if c.maxSavepoints > 0 {
		kept, err := c.store.Savepoints()
		if err != nil {
			return 0, err
		}
		if len(kept) >= c.maxSavepoints {
			return 0, fmt.Errorf("%w: %d kept (checkpoint { max_savepoints = %d }), ids %v; remove one with `eddy savepoint rm -c FILE ID`",
				ErrTooManySavepoints, len(kept), c.maxSavepoints, kept)
		}
	}
	c.mu.Lock()
	c.nextReq++
	req := savepointRequest{id: c.nextReq, done: make(chan error, 1)}
	c.mu.Unlock()
	before := c.lastTrig.Load()
	select {
	case c.msgs <- req:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case err := <-req.done:
		if err != nil {
			return 0, err
		}
		return c.lastDone.Load(), nil
	case <-ctx.Done():
		_ = before
		return 0, ctx.Err()
	}
}
