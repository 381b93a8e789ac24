package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// isNoSpace reports whether err says the file system is full: ENOSPC, or a
// quota (EDQUOT).
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

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

// budgetReason is budgetPlace's reason: "max_disk reached: X of Y".
func budgetReason(used, budget int64) string {
	return fmt.Sprintf("max_disk reached: %s of %s", formatBytes(used), formatBytes(budget))
}

// overBudget reports whether used bytes take the whole budget; a budget of
// 0 (unknown) never does.
func overBudget(used, budget int64) bool { return budget > 0 && used >= budget }

// enforceBudget, after a sample, holds ingest (budgetPlace) while the
// components' total reaches the budget, and releases it once retention,
// the WAL's drain or rotation brought it below.
func (m *diskMeter) enforceBudget() {
	if m.holds == nil {
		return
	}
	var used int64
	for i := range m.usage {
		used += m.usage[i].Load()
	}
	switch {
	case overBudget(used, m.budget):
		if m.holds.hold(budgetPlace, budgetReason(used, m.budget)) && m.log != nil {
			m.log.Warn("disk budget reached: ingest holds messages unacked at the broker until usage drops (checkpoint retention, the WAL's drain, file sink rotation)",
				"used", config.FormatSize(used), "max_disk", config.FormatSize(m.budget), "components", m.describeUsage())
		}
	case m.holds.release(budgetPlace) && m.log != nil:
		m.log.Info("disk usage below the budget again: ingest resumes", "used", config.FormatSize(used), "max_disk", config.FormatSize(m.budget))
	}
}

// describeUsage lists each component's last sampled use, for a log line.
func (m *diskMeter) describeUsage() string {
	parts := make([]string, len(diskComponents))
	for i, c := range diskComponents {
		parts[i] = c + " " + formatBytes(m.usage[i].Load())
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

// startAdminOnce starts the admin endpoint, if configured and not started
// yet: run starts it once checkpoints are set up, or a state rebuild that
// waits for disk space starts it earlier, so /readyz can say why.
func (a *Agent) startAdminOnce() error {
	if a.cfg.Agent.Admin == "" || a.admin != nil {
		return nil
	}
	ad, err := startAdmin(a, a.cfg.Agent.Admin, a.cfg.Agent.AdminToken, a.log)
	if err != nil {
		return err
	}
	a.admin = ad
	return nil
}

// closeAdmin stops the admin endpoint, if started.
func (a *Agent) closeAdmin() {
	if a.admin != nil {
		a.admin.close()
	}
}

// statePlace is the hold of a state rebuild that waits for disk space.
const statePlace = "state"

// restoreWaitingForSpace restores sel; when the rebuild finds the disk full
// it stays up instead of failing the start: /readyz says disk_full with the
// state directory, free space is polled once a second, and the rebuild is
// tried again once noSpaceMinFreed more is free than after the failure.
// It gives up only when ctx ends, saying so.
func (a *Agent) restoreWaitingForSpace(ctx context.Context, sel checkpoint.Selection) error {
	dir := filepath.Join(a.cfg.Agent.DataDir, "state")
	for {
		err := a.restore(sel)
		if err == nil || !isNoSpace(err) {
			if err == nil && a.diskHolds.release(statePlace) {
				a.log.Info("disk has room again: state rebuilt", "checkpoint", sel.Manifest.ID, "path", dir)
			}
			return err
		}
		freeAtFull, _ := freeBytes(a.cfg.Agent.DataDir)
		if a.diskHolds.hold(statePlace, dir+": "+err.Error()) {
			a.log.Warn("disk full: the state rebuild waits until space frees", "checkpoint", sel.Manifest.ID,
				"path", dir, "free_bytes", freeAtFull, "err", err)
		}
		if err := a.startAdminOnce(); err != nil {
			return err
		}
		if err := waitForFreeSpace(ctx, a.cfg.Agent.DataDir, freeAtFull+noSpaceMinFreed); err != nil {
			return fmt.Errorf("agent: stopped while the disk was full: the state rebuild from checkpoint %d waited for space in %s (%v)", sel.Manifest.ID, dir, err)
		}
	}
}

// waitForFreeSpace polls the file system of path once a second until at
// least want bytes are free, or ctx ends.
func waitForFreeSpace(ctx context.Context, path string, want int64) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if free, err := freeBytes(path); err == nil && free >= want {
				return nil
			}
		}
	}
}
