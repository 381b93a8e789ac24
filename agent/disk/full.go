package agent

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// diskHolds is what waits because the disk is full, besides the
// checkpoints (checkpointer.diskFull): per place ("max_disk",
// "ingest/<source>", "state", "sink/<name>") why, with the path. /readyz is
// not ready while any is held; each place releases its own hold when it
// goes on. The zero value is ready to use; safe for concurrent use.
type diskHolds struct {
	mu    sync.Mutex
	holds map[string]string // place → reason
}

// hold records that place waits for space, and reports whether it was not
// waiting already (so the caller logs once).
func (h *diskHolds) hold(place, reason string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds == nil {
		h.holds = map[string]string{}
	}
	_, was := h.holds[place]
	h.holds[place] = reason
	return !was
}

// release ends place's wait, and reports whether it was waiting.
func (h *diskHolds) release(place string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, was := h.holds[place]
	delete(h.holds, place)
	return was
}

// reason returns why place waits, or "".
func (h *diskHolds) reason(place string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holds[place]
}

// details lists every hold as "place: reason", by place.
func (h *diskHolds) details() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, p := range slices.Sorted(maps.Keys(h.holds)) {
		out = append(out, p+": "+h.holds[p])
	}
	return out
}

// budgetPlace is the hold set while the components together use the whole
// disk budget (agent { max_disk }, or its default).
const budgetPlace = "max_disk"

// budgetReason is budgetPlace's reason: "max_disk reached: X of Y in
// data_dir".
func budgetReason(used, budget int64, dataDir string) string {
	return fmt.Sprintf("max_disk reached: %s of %s in %s", admin.FormatBytes(used), admin.FormatBytes(budget), dataDir)
}

// overBudget reports whether used bytes take the whole budget; a budget of
// 0 (unknown) never does.
func overBudget(used, budget int64) bool { return budget > 0 && used >= budget }

// enforceBudget, after a sample, holds ingest (budgetPlace) while the
// components' total reaches the budget, and releases it once retention,
// the WAL's drain or rotation brought it below. A derived budget (no
// max_disk) is derived again from the sample first: what is free now plus
// what Eddy holds, at most half the file system, so space an operator
// frees is Eddy's again without a restart.
func (m *diskMeter) enforceBudget() {
	var used int64
	for i := range m.usage {
		used += m.usage[i].Load()
	}
	if m.derived && m.size.Load() > 0 {
		m.budget.Store(defaultDiskBudget(fsStats{size: m.size.Load(), free: m.free.Load()}, used))
	}
	if m.holds == nil {
		return
	}
	budget := m.budget.Load()
	switch {
	case overBudget(used, budget):
		if m.holds.hold(budgetPlace, budgetReason(used, budget, m.dataDir)) && m.log != nil {
			m.log.Warn("disk budget reached: ingest holds messages unacked at the broker until usage drops (checkpoint retention, the WAL's drain, file sink rotation)",
				"used", config.FormatSize(used), "max_disk", config.FormatSize(budget), "components", m.describeUsage())
		}
	case m.holds.release(budgetPlace) && m.log != nil:
		m.log.Info("disk usage below the budget again: ingest resumes", "used", config.FormatSize(used), "max_disk", config.FormatSize(budget))
	}
}

// describeUsage lists each component's last sampled use, for a log line.
func (m *diskMeter) describeUsage() string {
	parts := make([]string, len(diskComponents))
	for i, c := range diskComponents {
		parts[i] = c + " " + admin.FormatBytes(m.usage[i].Load())
	}
	return strings.Join(parts, ", ")
}

// diskFullDetail is the /readyz "disk" check's detail: the checkpoint
// store's full disk (ckpt, "" if not) and every other hold.
func diskFullDetail(ckpt string, holds []string) string {
	var parts []string
	if ckpt != "" {
		parts = append(parts, "checkpoints: "+ckpt)
	}
	parts = append(parts, holds...)
	if len(parts) == 0 {
		return ""
	}
	return "disk_full: " + strings.Join(parts, "; ") + "; each resumes by itself when space frees"
}

// checkpointDiskFull is why the checkpoint store's disk counts as full, or
// "" (also before checkpoints are set up).
func (a *Agent) checkpointDiskFull() string {
	if a.ckpt == nil {
		return ""
	}
	return a.ckpt.diskFullReason()
}

// statePlace is the hold of a state rebuild that waits for disk space.
const statePlace = "state"

// restoreWaitingForSpace restores sel; when the rebuild finds the disk full
// it stays up instead of failing the start: /readyz says disk_full with the
// path that failed (the state directory when the error names none), free
// space on its file system is polled once a second, and the rebuild is
// tried again once noSpaceMinFreed more is free than after the failure.
// Any ENOSPC here is waited out, however much is free after it: the
// failed rebuild removed its partial file, which may have been most of
// the file system. It gives up only when ctx ends, saying so.
func (a *Agent) restoreWaitingForSpace(ctx context.Context, sel checkpoint.Selection) error {
	dir := filepath.Join(a.cfg.Agent.DataDir, "state")
	for {
		err := a.restorer.restore(sel, a.pipelines, a.sources)
		if err == nil || !isNoSpace(err) {
			if err == nil {
				a.restoredID = sel.Manifest.ID
			}
			if err == nil && a.diskHolds.release(statePlace) {
				a.log.Info("disk has room again: state rebuilt", "checkpoint", sel.Manifest.ID, "path", dir)
			}
			return err
		}
		path := failedPath(err)
		if path == "" {
			path = dir
		}
		freeAtFull, _ := freeNear(path)
		if a.diskHolds.hold(statePlace, path+": "+err.Error()) {
			a.log.Warn("disk full: the state rebuild waits until space frees", "checkpoint", sel.Manifest.ID,
				"path", path, "free_bytes", freeAtFull, "err", err)
		}
		if err := a.startAdminOnce(); err != nil {
			return err
		}
		if err := waitForFreeSpace(ctx, path, freeAtFull+noSpaceMinFreed); err != nil {
			return fmt.Errorf("agent: stopped while the disk was full: the state rebuild from checkpoint %d waited for space in %s (%v)", sel.Manifest.ID, path, err)
		}
	}
}

// regionPlace is the hold of a failover region whose write (a file sink's
// part, a dead letter, the state's working file, a WAL append) found its
// file system full.
func regionPlace(name string) string { return "pipelines/" + name }

// waitRegionSpace, after region name failed for lack of space (cause) on
// the file system of short.path, holds it (/readyz: disk_full with that
// path) and polls that file system's free space once a second until
// noSpaceMinFreed more than at the failure is free, or ctx ends (stopping:
// the region then restarts at once, so shutdown finds it running). Its
// output since the last checkpoint is replayed, so nothing is lost or
// doubled.
func (a *Agent) waitRegionSpace(ctx context.Context, name string, short diskShortage, cause error) {
	place := regionPlace(name)
	a.diskHolds.hold(place, short.path+": "+cause.Error())
	a.log.Warn("disk full: pipelines wait until space frees, then restart from the last checkpoint (not counted by the restart strategy)",
		"pipelines", name, "path", short.path, "free_bytes", short.free, "err", cause)
	if waitForFreeSpace(ctx, short.path, short.free+noSpaceMinFreed) == nil {
		a.log.Info("disk has room again: pipelines restart", "pipelines", name, "path", short.path)
	}
	a.diskHolds.release(place)
}

// finalOnFullDisk decides the final checkpoint while the checkpoint
// store's disk is full. At the end of the input it waits for space (the
// output is complete only once the final checkpoint commits) and returns
// false, to take it; when stopping on a signal, or told to stop while
// waiting, it says in one line which checkpoint the next start restores
// and returns true: no final checkpoint is tried (it would fail the same
// way), and the agent exits cleanly.
func (a *Agent) finalOnFullDisk(ctx context.Context) bool {
	reason := a.ckpt.diskFullReason()
	if reason == "" {
		return false
	}
	if ctx.Err() == nil {
		a.log.Warn("disk full: the final checkpoint waits until space frees", "err", reason)
		t := time.NewTicker(checkpointTick)
		defer t.Stop()
		for reason != "" && ctx.Err() == nil {
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			reason = a.ckpt.diskFullReason()
		}
		if reason == "" {
			return false
		}
	}
	next := "starts empty (no checkpoint completed)"
	if id := max(a.ckpt.lastDone.Load(), a.restoredID); id > 0 {
		next = fmt.Sprintf("restores checkpoint %d, the last that completed", id)
	}
	a.log.Warn("stopping with the disk full: no final checkpoint; the next start "+next, "err", reason)
	return true
}
