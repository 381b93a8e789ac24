package agent

// noSpaceMinFreed is how much free space must come back, at least, before
// checkpoints are tried again after the disk was full.
const noSpaceMinFreed = 1 << 20

// noteDiskFull, if err says the disk is full (ENOSPC, or a quota: EDQUOT),
// puts the coordinator in its disk-full state (checkpoint.Coordinator.
// DiskFull): failures stop counting towards tolerable_failures, /readyz
// says disk_full, and pollDiskSpace ends it once space frees.
func (c *checkpointer) noteDiskFull(err error) {
	if err == nil || !isNoSpace(err) {
		return
	}
	c.fullPath = failedPath(err)
	if c.fullPath == "" {
		c.fullPath = c.store.Dir()
	}
	c.freeAtFull, _ = freeNear(c.fullPath)
	c.diskPolledMs = c.clk.monoMs()
	if c.coord.IsDiskFull() {
		return
	}
	msg := c.fullPath + ": " + err.Error()
	c.diskFull.Store(&msg)
	c.coord.Tick(c.now())
	c.coord.DiskFull(true)
	c.log.Warn("disk full: checkpoints wait until space frees (they do not count as failures meanwhile)",
		"path", c.fullPath, "free_bytes", c.freeAtFull, "err", err)
}

// pollDiskSpace, while the disk is full, looks once a second at the free
// space of the file system that was full (fullPath's) and ends the
// disk-full state when enough came back: twice the last checkpoint's
// bytes, or noSpaceMinFreed more than when it filled up. A checkpoint that
// fails again for lack of space starts it over, uncounted.
func (c *checkpointer) pollDiskSpace() {
	if !c.coord.IsDiskFull() {
		return
	}
	now := c.clk.monoMs()
	if now-c.diskPolledMs < 1000 {
		return
	}
	c.diskPolledMs = now
	free, err := freeNear(c.fullPath)
	if err != nil || (free < 2*c.lastSize.Load() && free < c.freeAtFull+noSpaceMinFreed) {
		return
	}
	c.diskFull.Store(nil)
	c.coord.Tick(c.now())
	c.coord.DiskFull(false)
	c.log.Info("disk has room again: checkpoints resume", "path", c.fullPath, "free_bytes", free)
}

// diskFullReason returns why the disk counts as full, or "".
func (c *checkpointer) diskFullReason() string {
	if p := c.diskFull.Load(); p != nil {
		return *p
	}
	return ""
}
