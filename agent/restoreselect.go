package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eddy-edge/eddy/agent/offsite"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// errNotRestored is Run's error when no checkpoint verifies and an ingest
// log no longer reaches back to its start: starting empty would lose the
// state that log's trimmed part built. The log line before it names the
// ways out.
var errNotRestored = errors.New("agent: refusing to start empty: no checkpoint verifies and the ingest log is trimmed (see the error logged above)")

// selectRestore chooses the checkpoint a start restores: the one --from
// names, or the newest local one that verifies, logging each one skipped.
//
// When none verifies (and --from is unset) although state existed (a
// checkpoint was skipped, or an ingest log was trimmed below the readings
// that built it), it first fetches the newest uploaded checkpoint that
// verifies (with an upload block) and selects again. If still none
// verifies:
//
//   - every ingest log reaches back to its start: it starts empty, with a
//     warning; replaying the logs and files rebuilds the state;
//   - an ingest log is trimmed: it refuses to start (errNotRestored), with
//     one error line naming the ways out (`eddy restore --from s3://…`, or
//     --allow-non-restored-state to start empty without that state).
//
// The Selection and error are SelectRestore's otherwise; with
// checkpoint.ErrNoCheckpoint the start is empty. sources are the ones just
// opened, whose ingest logs tell whether state existed. eddy validate
// decides as this does (decideEmptyStart), without fetching.
func (r *restorer) selectRestore(ctx context.Context, store *checkpoint.Store, sources map[string]*sourceRunner) (checkpoint.Selection, error) {
	logged := map[uint64]bool{}
	sel, err := r.selectLogged(store, logged)
	if !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return sel, err
	}
	if r.from != "" { // a checkpoint directory without one
		r.log.Info("no checkpoint to restore: starting empty", "from", r.from)
		return sel, err
	}
	trimmed := trimmedIngest(sources)
	switch decideEmptyStart(len(sel.Skipped) > 0, trimmed, r.cfg.Upload != nil, r.allowNonRestored) {
	case emptyFresh:
		r.log.Info("no checkpoint to restore: starting empty")
		return sel, err
	case emptyFetch:
		id, ferr := r.fetchUploaded(ctx)
		switch {
		case ferr == nil:
			r.log.Warn("no local checkpoint verifies: fetched the newest uploaded checkpoint that does", "id", id)
			sel, err = r.selectLogged(store, logged)
			if !errors.Is(err, checkpoint.ErrNoCheckpoint) {
				return sel, err
			}
		case ctx.Err() != nil:
			return sel, fmt.Errorf("agent: stopped while fetching the uploaded checkpoint: %w", ctx.Err())
		default:
			r.log.Warn("no local checkpoint verifies, and no uploaded one could be fetched", "err", ferr)
		}
	}
	switch decideEmptyStart(true, trimmed, false, r.allowNonRestored) {
	case emptyReplay:
		r.log.Warn("no checkpoint verifies: starting empty; every ingest log reaches back to its start, so replaying the input rebuilds the state",
			"skipped", len(sel.Skipped))
		return sel, err
	case emptyDrop:
		r.log.Warn("no checkpoint verifies and the ingest log no longer reaches its start: starting empty without the state of the readings it dropped (--allow-non-restored-state)",
			"ingest", strings.Join(trimmed, ", "), "skipped", len(sel.Skipped))
		return sel, err
	}
	r.log.Error(refuseEmptyReason, "ingest", strings.Join(trimmed, ", "), "skipped", len(sel.Skipped), "uploads", r.cfg.Upload != nil)
	return sel, errNotRestored
}

// refuseEmptyReason is the error run logs, and validate prints, before
// refusing to start empty (errNotRestored).
const refuseEmptyReason = "refusing to start empty: no checkpoint verifies and the ingest log no longer reaches its start, so the state of the readings it dropped would be lost; " +
	"restore a checkpoint with `eddy restore --from s3://BUCKET/PREFIX/`, or start with --allow-non-restored-state to start empty without that state"

// emptyStart is what a start does when --from is unset and no local
// checkpoint verifies (decideEmptyStart).
type emptyStart int

const (
	// emptyFresh: no state existed (no checkpoint skipped, no ingest log
	// trimmed): start empty.
	emptyFresh emptyStart = iota
	// emptyFetch: state existed and there is an upload block: fetch the
	// newest uploaded checkpoint that verifies, then decide again
	// without one to fetch.
	emptyFetch
	// emptyReplay: every ingest log reaches back to its start: start
	// empty, replaying the input rebuilds the state.
	emptyReplay
	// emptyDrop: an ingest log is trimmed, and --allow-non-restored-state
	// accepts losing that state: start empty.
	emptyDrop
	// emptyRefuse: an ingest log is trimmed: refuse (errNotRestored).
	emptyRefuse
)

// decideEmptyStart decides what a start without a checkpoint to restore
// does, given whether checkpoints were skipped (they did not verify), the
// ingest logs that no longer reach their start (trimmedIngest), whether
// it can still fetch an uploaded checkpoint, and
// --allow-non-restored-state. eddy run and eddy validate both decide by
// it.
func decideEmptyStart(skipped bool, trimmed []string, canFetch, allowNonRestored bool) emptyStart {
	switch {
	case !skipped && len(trimmed) == 0:
		return emptyFresh
	case canFetch:
		return emptyFetch
	case len(trimmed) == 0:
		return emptyReplay
	case allowNonRestored:
		return emptyDrop
	}
	return emptyRefuse
}

// selectLogged is store.SelectRestore(r.from) with a warning per skipped
// checkpoint not in logged yet (then added).
func (r *restorer) selectLogged(store *checkpoint.Store, logged map[uint64]bool) (checkpoint.Selection, error) {
	sel, err := store.SelectRestore(r.from)
	for _, sk := range sel.Skipped {
		if !logged[sk.ID] {
			logged[sk.ID] = true
			r.log.Warn("checkpoint skipped: it does not verify", "id", sk.ID, "reason", sk.Reason)
		}
	}
	return sel, err
}

// trimmedIngest lists the ingest logs of sources that no longer hold their
// first reading (offset 1), as "source from offset N", sorted.
func trimmedIngest(sources map[string]*sourceRunner) []string {
	var out []string
	for name, s := range sources {
		if s.ilog == nil {
			continue
		}
		if first := s.ilog.FirstOffset(); first > 1 {
			out = append(out, trimmedFrom(name, first))
		}
	}
	slices.Sort(out)
	return out
}

// trimmedFrom names source's ingest log, trimmed to start at offset first.
func trimmedFrom(source string, first uint64) string {
	return fmt.Sprintf("%s from offset %d", source, first)
}

// fetchUploaded downloads the newest uploaded checkpoint that verifies
// (under the upload block's prefix for this device) into the local store,
// and returns its id. Uploaded checkpoints it skips are logged.
func (r *restorer) fetchUploaded(ctx context.Context) (uint64, error) {
	prefix := config.Expand(r.cfg.Upload.Prefix, map[string]string{"device_id": r.cfg.Agent.DeviceID})
	t := offsite.Target{Upload: r.cfg.Upload, DeviceID: r.cfg.Agent.DeviceID, Prefix: prefix}
	return offsite.FetchNewest(ctx, t, r.cfg.Agent.DataDir, r.log)
}
