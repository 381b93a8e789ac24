package checkpointing

import (
	"time"
)

// holdWhileBlocked stalls the coordinator while an exactly-once sink waits
// for its uplink with a full buffer (checkpoint.Coordinator.Stall): the
// checkpoint in flight then waits for the uplink instead of timing out and,
// after tolerable_failures, failing the run, which cannot bring the uplink
// back. It logs once a stall has lasted half the checkpoint timeout.
func (c *Driver) holdWhileBlocked() {
	blocked := false
	for _, s := range c.txSinks {
		if s.WriteBlocked() {
			blocked = true
			break
		}
	}
	now := c.monoMs()
	if blocked != c.coord.Stalled() {
		c.coord.Tick(c.now())
		c.coord.Stall(blocked)
		if blocked {
			c.blockedSinceMs, c.blockedLogged = now, false
		} else if c.blockedLogged {
			c.log.Info("checkpoints resume: the exactly-once sink writes again", "after", time.Duration(now-c.blockedSinceMs)*time.Millisecond)
		}
		return
	}
	if blocked && !c.blockedLogged && now-c.blockedSinceMs >= c.timeout.Milliseconds()/2 {
		c.blockedLogged = true
		c.log.Warn("checkpoints wait for the uplink: an exactly-once sink is blocked with its buffer full (when_full = \"block\")")
	}
}

// activity counts what the sources have forwarded and the exactly-once
// sinks have been given; it only grows.
func (c *Driver) activity() uint64 {
	var n uint64
	for _, s := range c.sources {
		n += s.Forwarded()
	}
	for _, s := range c.txSinks {
		n += s.Written()
	}
	return n
}

// unchanged reports that a periodic checkpoint would only repeat the last
// one: none is in flight and, since the last was triggered, no source
// forwarded anything and no exactly-once sink received output. The ticker
// then leaves the coordinator alone, so an idle device writes nothing; the
// next input makes the overdue checkpoint start at once. Savepoints and the
// final checkpoint do not come through the ticker and are never skipped,
// and while a requested savepoint waits (behind the checkpoint its request
// started, say) the ticker goes on ticking.
// State that changes without input or exactly-once output (TTL cleanup,
// firings to at-least-once sinks) is checkpointed with the next change; a
// restore meanwhile repeats that cleanup or at-least-once output.
//
// A full ingest log is never unchanged: its intake holds messages until a
// checkpoint lets the log shrink (the agent truncates it on each completed
// checkpoint), and holding them is what keeps the sources from forwarding
// anything once the pipelines have read the log to its end. Skipping would wait for input that only a checkpoint
// can let in.
func (c *Driver) unchanged() bool {
	return c.lastTrig.Load() == c.lastDone.Load() && c.activity() == c.trigActivity && !c.ingestFull() && !c.savepointWaits()
}

// savepointWaits reports whether a requested savepoint has not been
// answered yet.
func (c *Driver) savepointWaits() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters) > 0
}

// ingestWaits reports whether a checkpoint now, rather than at the end of
// the interval, is what the pipelines wait for: a source's ingest log is
// full and its reader has forwarded everything in it. Only a checkpoint
// lets that log shrink (below the newest checkpoint while it is full);
// without this a burst larger than ingest { max_disk } would pass at one
// log's worth per interval, the device idle in between.
//
// It asks when something was forwarded since the last checkpoint was
// triggered, so the next holds a newer position. With nothing forwarded it
// asks only if the last checkpoint completed while no log was full: that
// one truncated below the oldest retained checkpoint, and one at the same
// position, completing while the log is full, truncates below itself. Once
// that is done a log that stays full (its batch does not fit even then)
// gets one checkpoint per interval (unchanged), not one per tick. Called
// on Run's goroutine only.
func (c *Driver) ingestWaits() bool {
	waits := false
	for _, s := range c.sources {
		if in := s.Ingest(); in.Full && in.ReadToEnd {
			waits = true
			break
		}
	}
	switch {
	case !waits:
		return false
	case c.activity() != c.trigActivity:
		return true
	}
	return !c.fullAtDone && c.lastTrig.Load() == c.lastDone.Load()
}

// ingestFull reports whether a source's ingest log refuses appends because
// it is full (ingest.Log.Full).
func (c *Driver) ingestFull() bool {
	for _, s := range c.sources {
		if s.Ingest().Full {
			return true
		}
	}
	return false
}
