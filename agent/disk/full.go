package disk

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Holds is what waits because the disk is full, besides the checkpoints
// (Watch): per place (BudgetPlace, StatePlace, RegionPlace, IngestPlace)
// why, with the path. /readyz is not ready while any is held; each place
// releases its own hold when it goes on. The zero value holds nothing and
// is ready to use; a Holds is safe for concurrent use, and must not be
// copied after first use.
type Holds struct {
	mu    sync.Mutex
	holds map[string]string // place → reason
}

// Hold records that place waits for space, for reason (which replaces an
// earlier one), and reports whether it was not waiting already, so that
// the caller logs once per wait.
func (h *Holds) Hold(place, reason string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds == nil {
		h.holds = map[string]string{}
	}
	_, was := h.holds[place]
	h.holds[place] = reason
	return !was
}

// Release ends place's wait, and reports whether it was waiting: true
// once per wait, so that the caller logs its end once.
func (h *Holds) Release(place string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, was := h.holds[place]
	delete(h.holds, place)
	return was
}

// Reason returns why place waits, or "" when it does not.
func (h *Holds) Reason(place string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holds[place]
}

// Details lists every hold as "place: reason", sorted by place; nil when
// nothing is held.
func (h *Holds) Details() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, p := range slices.Sorted(maps.Keys(h.holds)) {
		out = append(out, p+": "+h.holds[p])
	}
	return out
}

// Detail is the /readyz "disk" check's detail: the checkpoint store's
// full disk (checkpoints, Watch.Reason: "" if not) and every hold, or ""
// when neither waits, and then the check passes.
func (h *Holds) Detail(checkpoints string) string {
	var parts []string
	if checkpoints != "" {
		parts = append(parts, "checkpoints: "+checkpoints)
	}
	parts = append(parts, h.Details()...)
	if len(parts) == 0 {
		return ""
	}
	return "disk_full: " + strings.Join(parts, "; ") + "; each resumes by itself when space frees"
}

// BudgetPlace is the hold set while the components together use the whole
// disk budget (agent { max_disk }, or its default; see Meter). Ingest
// takes nothing in while it is held.
const BudgetPlace = "max_disk"

// StatePlace is the hold of a state rebuild that waits for disk space
// (Holds.Rebuild).
const StatePlace = "state"

// RegionPlace is the hold of a failover region whose write (a file sink's
// part, a dead letter, the state's working file, a WAL append) found its
// file system full (Holds.WaitRegion).
func RegionPlace(name string) string { return "pipelines/" + name }

// IngestPlace is the hold of source's ingest log while its file system is
// full.
func IngestPlace(source string) string { return "ingest/" + source }

// Rebuild runs rebuild, the state's rebuild from checkpoint id into
// stateDir, and returns its result, except when it finds the disk full:
// then it holds StatePlace (/readyz says disk_full with the path that
// failed, stateDir when the error names none), calls serveReadyz after
// each such failure (to bring the admin endpoint up, so that /readyz can
// say so: it must do nothing when called again; its error is returned as
// is), polls free space on that file
// system once a second, and tries again once 1 MiB more is free than after
// the failure. Any ENOSPC or EDQUOT is waited out, however much is free
// after it: the failed rebuild removed its partial file, which may have
// been most of the file system. It gives up only when ctx ends, with an
// error saying so. The hold is released (and logged) when a try succeeds.
func (h *Holds) Rebuild(ctx context.Context, log *slog.Logger, stateDir string, id uint64, rebuild, serveReadyz func() error) error {
	for {
		err := rebuild()
		if err == nil || !IsNoSpace(err) {
			if err == nil && h.Release(StatePlace) {
				log.Info("disk has room again: state rebuilt", "checkpoint", id, "path", stateDir)
			}
			return err
		}
		path := failedPath(err)
		if path == "" {
			path = stateDir
		}
		freeAtFull, _ := freeNear(path)
		if h.Hold(StatePlace, path+": "+err.Error()) {
			log.Warn("disk full: the state rebuild waits until space frees", "checkpoint", id,
				"path", path, "free_bytes", freeAtFull, "err", err)
		}
		if err := serveReadyz(); err != nil {
			return err
		}
		if err := waitForFreeSpace(ctx, path, freeAtFull+minFreed); err != nil {
			return fmt.Errorf("agent: stopped while the disk was full: the state rebuild from checkpoint %d waited for space in %s (%v)", id, path, err)
		}
	}
}

// WaitRegion, after region name failed for lack of space (cause) on the
// file system short names (ShortageOf), holds RegionPlace(name) (/readyz:
// disk_full with that path) and polls that file system's free space once
// a second until 1 MiB more than at the failure is free, or ctx ends
// (stopping: the caller then restarts the region at once, so that
// shutdown finds it running). The hold is released when it returns.
// Nothing is lost or doubled by the wait: the region's output since the
// last checkpoint is replayed when it restarts.
func (h *Holds) WaitRegion(ctx context.Context, log *slog.Logger, name string, short Shortage, cause error) {
	place := RegionPlace(name)
	h.Hold(place, short.path+": "+cause.Error())
	log.Warn("disk full: pipelines wait until space frees, then restart from the last checkpoint (not counted by the restart strategy)",
		"pipelines", name, "path", short.path, "free_bytes", short.free, "err", cause)
	if waitForFreeSpace(ctx, short.path, short.free+minFreed) == nil {
		log.Info("disk has room again: pipelines restart", "pipelines", name, "path", short.path)
	}
	h.Release(place)
}
