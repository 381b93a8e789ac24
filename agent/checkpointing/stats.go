package checkpointing

// Stats is the Driver's counters at one moment.
type Stats struct {
	Completed, Failed uint64 // eddy_checkpoints_completed_total, eddy_checkpoint_failures_total
	// LastCompletedID and LastTriggeredID are 0 until one was.
	LastCompletedID, LastTriggeredID uint64
	// Of the last completed checkpoint: duration, bytes written, bytes of
	// its whole chain, and the barrier alignment's duration.
	LastDurationMs, LastSizeBytes, LastFullBytes, LastAlignmentMs int64
	// IdleTicks counts the ticks that left the coordinator alone because a
	// periodic checkpoint would only repeat the last one.
	IdleTicks uint64
}

// Stats returns the Driver's counters. Safe for concurrent use; each field
// is read atomically, not all together.
func (c *Driver) Stats() Stats {
	return Stats{
		Completed: c.mCompleted.Get(), Failed: c.mFailures.Get(),
		LastCompletedID: c.lastDone.Load(), LastTriggeredID: c.lastTrig.Load(),
		LastDurationMs: c.lastDurMs.Load(), LastSizeBytes: c.lastSize.Load(),
		LastFullBytes: c.lastFull.Load(), LastAlignmentMs: c.lastAlign.Load(),
		IdleTicks: c.idleTicks.Load(),
	}
}

// LastCompleted is the id of the last completed checkpoint, 0 before the
// first. Safe for concurrent use.
func (c *Driver) LastCompleted() uint64 { return c.lastDone.Load() }

// DiskFullReason is why the store's disk counts as full, or "". Safe for
// concurrent use.
func (c *Driver) DiskFullReason() string { return c.full.Reason() }
