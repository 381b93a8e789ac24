package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/state/vfs"
)

// Validate loads the configuration at path and makes every check that Run
// makes before it touches the network or data_dir (checkConfig), without
// starting anything. It returns the diagnostics as
// "file:line:col: ..." lines and whether the configuration has no errors.
// It reads nothing in data_dir: the state is CheckState's.
func Validate(path string) (report string, ok bool) {
	cfg, diags := config.Load(path)
	if !diags.HasErrors() {
		diags = append(diags, checkConfig(cfg)...)
		diags = append(diags, unsupported(cfg)...)
	}
	return config.FormatDiagnostics(diags), !diags.HasErrors()
}

// unsupported reports settings the configuration language accepts but this
// build cannot honour, as warnings for validate and errors for run. None
// today.
func unsupported(cfg *config.Config) hcl.Diagnostics { return nil }

// StateCheck is what eddy run, started on a configuration, would do with
// the checkpoints it finds in the configuration's data_dir.
type StateCheck struct {
	// Lines say it: which checkpoint run restores, then per pipeline
	// "restore", "start empty", "drop" or "refuse to start", and why.
	Lines []string
	// Refusal is the error run would exit with; nil when it starts.
	Refusal error
}

// CheckState reads the state in the data_dir of the valid configuration
// at path (Validate first) and decides, as eddy run would at start with
// --allow-non-restored-state as given, what becomes of it (selectRestore,
// planRestore: the decisions run acts on). It modifies nothing: it reads
// data_dir/checkpoints only (the manifests, and the files of the
// checkpoint it selects, to verify them as run does), never the device id
// or the working state.
//
// With no local checkpoint that verifies, run may fetch one from S3: that
// checkpoint is not read here, and the lines say so.
func CheckState(path string, allowNonRestored bool) (StateCheck, error) {
	lc, err := loadConfig(path)
	if err != nil {
		return StateCheck{}, err
	}
	cfg := lc.cfg
	dir := filepath.Join(cfg.Agent.DataDir, "checkpoints")
	var out StateCheck
	say := func(format string, args ...any) { out.Lines = append(out.Lines, fmt.Sprintf(format, args...)) }
	var sel checkpoint.Selection
	err = checkpoint.ErrNoCheckpoint
	if _, serr := os.Stat(filepath.Join(dir, "manifests")); !errors.Is(serr, fs.ErrNotExist) {
		sel, err = checkpoint.ReadStore(vfs.Default, dir).SelectRestore("")
	}
	for _, sk := range sel.Skipped {
		say("state: checkpoint %d skipped: it does not verify (%v)", sk.ID, sk.Reason)
	}
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		trimmed, err := trimmedOnDisk(cfg)
		if err != nil {
			return out, err
		}
		switch decideEmptyStart(len(sel.Skipped) > 0, trimmed, cfg.Upload != nil, allowNonRestored) {
		case emptyFresh:
			say("state: no checkpoint in %s: every pipeline starts empty", cfg.Agent.DataDir)
		case emptyFetch:
			say("state: no checkpoint in %s verifies: eddy run fetches the newest uploaded one that does, which validate does not read", cfg.Agent.DataDir)
		case emptyReplay:
			say("state: no checkpoint in %s verifies: every pipeline starts empty, and replaying the ingest logs, which reach back to their start, rebuilds the state", cfg.Agent.DataDir)
		case emptyDrop:
			say("state: no checkpoint in %s verifies: every pipeline starts empty without the state of the readings the ingest log dropped (--allow-non-restored-state): %s",
				cfg.Agent.DataDir, strings.Join(trimmed, ", "))
		case emptyRefuse:
			say("state: %s: %s", refuseEmptyReason, strings.Join(trimmed, ", "))
			out.Refusal = errNotRestored
		}
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("agent: restore: %w", err)
	}
	m := sel.Manifest
	say("state: eddy run restores checkpoint %d (%s) from %s:", m.ID, m.Time.UTC().Format(time.RFC3339), cfg.Agent.DataDir)
	var configured []stages.RolloverVerdict
	var plans []*stages.Plan
	// A rollover on processing time cuts after the start, which validate
	// cannot know: its words name no time, and the time passed matters
	// to nothing it prints.
	now := time.Now().UnixMilli()
	for _, p := range cfg.Pipelines {
		pl, diags := stages.Compile(cfg, p)
		if diags.HasErrors() {
			return out, errors.New(config.FormatDiagnostics(diags))
		}
		plans = append(plans, pl)
		configured = append(configured, pl.CheckRollover(lc.src, m, stages.BoundedSources(cfg), now))
	}
	rolls := planRollovers(m, configured, stages.BoundedSources(cfg), now, allowNonRestored)
	rolls.keepPrevious(cfg, lc.src, m)
	for i, v := range rolls.verdicts {
		if !v.Runs() {
			continue
		}
		if _, err := stages.CompileOld(cfg, lc.src, v.Roll); err != nil { // as run compiles it
			rolls.verdicts[i].Refusal = fmt.Errorf("agent: %w", err)
			if rolls.refusal == nil {
				rolls.refusal = rolls.verdicts[i].Refusal
			}
		}
	}
	rolled := map[string]stages.RolloverVerdict{}
	for _, v := range rolls.verdicts {
		rolled[v.Pipeline] = v
	}
	var verdicts []stages.RestoreVerdict
	for _, pl := range plans {
		name := pl.Config().Name
		if rolls.handles(name) {
			verdicts = append(verdicts, stages.RestoreVerdict{Pipeline: name, Stateful: true, InCheckpoint: true})
			continue
		}
		verdicts = append(verdicts, pl.CheckRestore(lc.src, m, allowNonRestored))
	}
	n := len(verdicts)
	for _, name := range rolls.known {
		verdicts = append(verdicts, stages.RestoreVerdict{Pipeline: name})
	}
	plan := planRestore(m, verdicts, allowNonRestored)
	for _, v := range plan.verdicts[:n] {
		if rv, ok := rolled[v.Pipeline]; ok {
			say("  pipeline %q: %s", v.Pipeline, rolloverText(rv))
			continue
		}
		say("  pipeline %q: %s", v.Pipeline, verdictText(v))
	}
	for _, v := range rolls.verdicts {
		if v.Removed {
			say("  pipeline %q: %s", v.Pipeline, rolloverText(v))
		}
	}
	for _, name := range plan.removed {
		if allowNonRestored {
			say("  pipeline %q: drop its state (--allow-non-restored-state): the configuration no longer has it", name)
		} else {
			say("  pipeline %q: refuse to start: the configuration no longer has it", name)
		}
	}
	out.Refusal = rolls.refusal
	if out.Refusal == nil {
		out.Refusal = plan.refusal
	}
	return out, nil
}

// rolloverText is what run does to a pipeline whose definition changed,
// e.g. "roll over: aggregates changed (max_temp added): …", or its
// refusal.
func rolloverText(v stages.RolloverVerdict) string {
	if v.Refusal != nil {
		return "refuse to start: " + strings.TrimPrefix(v.Refusal.Error(), "agent: ")
	}
	return v.Text()
}

// trimmedOnDisk lists the ingest logs of cfg's sources (those that log:
// MQTT and simulators) that no longer hold their first reading, as
// trimmedIngest does for opened ones, from their file names alone.
func trimmedOnDisk(cfg *config.Config) ([]string, error) {
	var out []string
	for _, src := range cfg.Sources {
		if src.MQTT == nil && src.Simulator == nil {
			continue
		}
		first, err := ingest.FirstOnDisk(filepath.Join(cfg.Agent.DataDir, "ingest", src.Name))
		if err != nil {
			return nil, fmt.Errorf("agent: source %q: %w", src.Name, err)
		}
		if first > 1 {
			out = append(out, trimmedFrom(src.Name, first))
		}
	}
	slices.Sort(out)
	return out, nil
}

// verdictText is what run does to one pipeline, e.g. "restore",
// "start empty (new pipeline)" or "refuse to start: aggregates changed
// (max_temp added)".
func verdictText(v stages.RestoreVerdict) string {
	var depended, kept string
	for _, c := range v.Changes {
		if c.Kept {
			kept += ", " + c.String()
		} else {
			depended += ", " + c.String()
		}
	}
	if depended != "" {
		depended = depended[2:]
	}
	switch {
	case v.Refusal != nil && depended != "":
		return "refuse to start: " + depended
	case v.Refusal != nil:
		return "refuse to start: " + strings.TrimPrefix(v.Refusal.Error(), "agent: ")
	case v.Drop:
		return "drop its state and start empty (--allow-non-restored-state): " + depended
	case !v.Stateful:
		return "keep no state"
	case !v.InCheckpoint:
		return "start empty (new pipeline)"
	case kept != "":
		return "restore; " + kept[2:] + ": the state restores, and the change applies to the readings after the checkpoint"
	}
	return "restore"
}
