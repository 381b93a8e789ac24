package checkpointing

import (
	"maps"
	"slices"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/state"
)

// WriteSnapshot writes snap as a snapshot file of checkpoint id for task
// (of pipeline) in the background, then acknowledges it with extra, or
// reports the write's failure. It owns snap from the call on and closes it.
// With written set, the file is also opened for reads (its index built
// while it is written) and handed to written, with a reference, before
// the acknowledgement. WaitWriters waits for it.
func (c *Driver) WriteSnapshot(id uint64, task, pipeline string, snap state.Snapshot, extra map[string][]byte, written func(*checkpoint.Table)) {
	c.writers.Add(1)
	go func() {
		defer c.writers.Done()
		defer snap.Close()
		kind := checkpoint.KindFull
		if snap.Incremental() {
			kind = checkpoint.KindIncremental
		}
		var ref checkpoint.FileRef
		var t *checkpoint.Table
		var err error
		if written != nil {
			ref, t, err = c.store.WriteSnapshotTable(task, pipeline, kind, id, snap.Entries)
		} else {
			ref, err = c.store.WriteSnapshot(task, pipeline, kind, id, snap.Entries)
		}
		if err != nil {
			c.Send(checkpoint.Failure{CheckpointID: id, Task: task, Err: err})
			return
		}
		if t != nil {
			written(t)
		}
		c.Send(checkpoint.Ack{CheckpointID: id, Task: task, Files: []checkpoint.FileRef{ref}, Extra: extra})
	}()
}

// OnMerged registers fn to receive, opened for reads and with a
// reference, each base merged from task's chain of files; it replaces the
// task's previous registration.
func (c *Driver) OnMerged(task string, fn func(*checkpoint.Table)) {
	c.mergedTo.Store(task, fn)
}

// handMerged hands the bases merged for tasks that read their files
// (OnMerged) to them; tables of tasks that do not are released.
func (c *Driver) handMerged(tables map[string]*checkpoint.Table) {
	for task, t := range tables {
		if fn, ok := c.mergedTo.Load(task); ok {
			fn.(func(*checkpoint.Table))(t)
		} else {
			t.Release()
		}
	}
}

// mergeChains merges each task's chain of cp into a new base in the
// background, from the files on disk, and answers the coordinator. If one
// task's merge fails, the bases merged for the others are discarded too:
// the next checkpoint is full instead, and no file is left that no manifest
// will reference.
func (c *Driver) mergeChains(cp *checkpoint.Compaction) {
	ctx := c.runCtx
	c.writers.Add(1)
	go func() {
		defer c.writers.Done()
		start := time.Now()
		c.log.Info("merging checkpoint chains into a new base", "through", cp.Through, "tasks", len(cp.Chains))
		res := checkpoint.Compacted{Through: cp.Through, Files: map[string]checkpoint.FileRef{}}
		var read, written int64
		tables := map[string]*checkpoint.Table{} // of the tasks that read their files
		for _, task := range slices.Sorted(maps.Keys(cp.Chains)) {
			chain := cp.Chains[task]
			var ref checkpoint.FileRef
			var err error
			if _, reads := c.mergedTo.Load(task); reads {
				var t *checkpoint.Table
				ref, t, err = c.store.MergeChainTable(ctx, chain, cp.Through)
				if t != nil {
					tables[task] = t
				}
			} else {
				ref, err = c.store.MergeChain(ctx, chain, cp.Through)
			}
			if ref.Name != "" {
				res.Files[task] = ref
			}
			if err != nil {
				res.Err = err
				break
			}
			res.Files[task] = ref
			written += ref.Size
			for _, f := range chain {
				read += f.Size
			}
		}
		if res.Err != nil {
			for _, ref := range res.Files {
				if err := c.store.Discard(ref); err != nil {
					c.log.Warn("removing a merged checkpoint file failed", "file", ref.Name, "err", err)
				}
			}
			res.Files = nil
			for _, t := range tables {
				t.Release()
			}
			if ctx.Err() == nil {
				c.log.Warn("merging checkpoint chains failed: the next checkpoint is full", "through", cp.Through, "err", res.Err)
			}
		} else {
			c.log.Info("checkpoint chains merged into a new base", "through", cp.Through, "tasks", len(res.Files),
				"read_bytes", read, "bytes", written, "duration_ms", time.Since(start).Milliseconds())
			c.handMerged(tables)
		}
		c.Send(res)
	}()
}

// CollectGarbage removes the snapshot files no manifest references: those
// of checkpoints that never completed and bases merged too late to be used,
// left by a crash or by the run that ends. Call it only while no checkpoint
// or merge is in flight: at start, before the first trigger, and at stop
// after WaitWriters.
func (c *Driver) CollectGarbage() {
	removed, err := c.store.CollectGarbage()
	if err != nil {
		c.log.Warn("removing unreferenced checkpoint files failed", "err", err)
	} else if len(removed) > 0 {
		c.log.Info("removed checkpoint files no checkpoint references", "files", len(removed))
	}
}

// WaitWriters waits until no snapshot write or chain merge is in flight:
// after it, no snapshot a subtask handed over is read any more.
func (c *Driver) WaitWriters() { c.writers.Wait() }
