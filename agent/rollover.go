package agent

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// rolloverPlan is what restoring a checkpoint does to the pipelines whose
// definition changed (stages.CheckRollover): run acts on it, validate
// prints it.
type rolloverPlan struct {
	// verdicts are those with something to do or to refuse: the
	// configuration's pipelines in its order, then the removed ones.
	verdicts []stages.RolloverVerdict
	// known are the names of state in the checkpoint the rollovers account
	// for (old definitions' instances, removed pipelines rolling over), so
	// that planRestore does not take them for removed pipelines.
	known []string
	// refusal is the first verdict's that cannot roll over.
	refusal error
}

// planRollovers decides the rollovers of checkpoint m from the verdicts
// of the configuration's pipelines, adding those of the pipelines m holds
// that the configuration no longer has. --allow-non-restored-state drops
// changed state instead, as before: no rollover. A removed pipeline that
// cannot roll out is refused, at a start as after a reload (which
// reloadCompatible refuses first). now is the wall clock at the restore
// (stages.CheckRollover).
func planRollovers(m *checkpoint.Manifest, configured []stages.RolloverVerdict, bounded func(string) bool, now int64, allowNonRestored bool) rolloverPlan {
	var plan rolloverPlan
	if allowNonRestored {
		return plan
	}
	names := map[string]bool{}
	all := slices.Clone(configured)
	for _, v := range configured {
		names[v.Pipeline] = true
	}
	for _, name := range stages.RolledPipelines(m) {
		if !names[name] {
			all = append(all, stages.CheckRollover(m, name, nil, true, bounded, now))
		}
	}
	for i, v := range all {
		if !v.New || v.Shape == nil {
			continue
		}
		for _, r := range all {
			if r.Removed && r.Runs() && r.Fresh && bytes.Equal(r.Shape, v.Shape) {
				all[i].RenamedFrom, all[i].Since = r.Pipeline, r.Roll.Cut
				break
			}
		}
	}
	for _, v := range all {
		if v.Roll == nil && !v.Retired && v.Refusal == nil && v.RenamedFrom == "" && v.Since == math.MinInt64 {
			continue
		}
		plan.verdicts = append(plan.verdicts, v)
		if plan.refusal == nil {
			plan.refusal = v.Refusal
		}
		if v.Roll != nil {
			plan.known = append(plan.known, v.Roll.Old)
		}
		if v.Removed && v.Refusal == nil {
			plan.known = append(plan.known, v.Pipeline)
		}
	}
	return plan
}

// handles reports whether the plan decides the restore of pipeline name,
// in place of its state shape's verdict.
func (plan rolloverPlan) handles(name string) bool {
	for _, v := range plan.verdicts {
		if v.Pipeline == name && v.Refusal == nil {
			return true
		}
	}
	return false
}

// applyRollovers opens the old definitions of the rollovers of plan and
// gives every pipeline involved its part, before the checkpoint
// coordinator learns the tasks and before anything starts.
func (df *dataflow) applyRollovers(plan rolloverPlan) (added bool, err error) {
	olds := map[string]*stages.Plan{}
	var oldPlans []*stages.Plan
	for _, v := range plan.verdicts {
		if v.Refusal != nil || !v.Runs() {
			continue
		}
		pl, err := stages.CompileOld(df.cfg, df.src, v.Roll)
		if err != nil {
			return added, fmt.Errorf("agent: %w", err)
		}
		olds[v.Pipeline] = pl
		oldPlans = append(oldPlans, pl)
	}
	if err := df.shareState(append(oldPlans, df.keptRemoved...)); err != nil {
		return added, err
	}
	for _, v := range plan.verdicts {
		if v.Refusal != nil || v.Kept && v.Roll == nil {
			continue
		}
		var next *stages.Pipeline
		for _, p := range df.pipelines {
			if p.Name() == v.Pipeline {
				next = p
			}
		}
		if text := v.Text(); text != "restore" && !v.Kept {
			attrs := []any{"pipeline", v.Pipeline}
			if v.Fresh && v.Roll != nil && v.Roll.ProcessingTime {
				attrs = append(attrs, "cut", time.UnixMilli(v.Roll.Cut).UTC().Format(time.RFC3339Nano)) // the words cannot name it: validate says the same
			}
			df.log.Info("restore: pipeline "+fmt.Sprintf("%q", v.Pipeline)+": "+text, attrs...)
		}
		if next != nil {
			next.SetRollover(stages.RolloverRole{Roll: v.Roll, Fresh: v.Fresh, Since: v.Since})
		}
		pl, ok := olds[v.Pipeline]
		if !ok {
			continue
		}
		old, err := df.newPipeline(pl)
		if err != nil {
			return added, err
		}
		old.SetRollover(stages.RolloverRole{Roll: v.Roll, Old: true, Fresh: v.Fresh})
		df.mu.Lock()
		df.pipelines = append(df.pipelines, old)
		df.mu.Unlock()
		added = true
	}
	return added, nil
}

// keepPrevious turns the refusal of each pipeline whose change (or
// removal) cannot roll over into keeping its previous definition, which
// checkpoint m recorded, so that the agent starts and runs it as before;
// it returns their plans by name. Without a recorded definition (a checkpoint of an
// earlier build) the refusal stays. A change during a rollover keeps the
// definition the rollover started, and the rollover goes on.
func (plan *rolloverPlan) keepPrevious(cfg *config.Config, src []byte, m *checkpoint.Manifest) map[string]*stages.Plan {
	kept := map[string]*stages.Plan{}
	plan.refusal = nil
	for i, v := range plan.verdicts {
		if v.Refusal != nil && v.Removed {
			if pl, err := stages.CompileKeptRemoved(cfg, src, v.Pipeline, m); err == nil {
				kept[v.Pipeline] = pl
				plan.verdicts[i].Kept, plan.verdicts[i].Refusal = true, nil
				plan.known = append(plan.known, v.Pipeline)
			}
		}
		if v.Refusal != nil && !v.Removed {
			for _, p := range cfg.Pipelines {
				if p.Name != v.Pipeline {
					continue
				}
				if pl, err := stages.CompileKept(cfg, src, p, m); err == nil {
					kept[p.Name] = pl
					plan.verdicts[i].Kept, plan.verdicts[i].Refusal = true, nil
					plan.known = append(plan.known, p.Name)
				}
			}
		}
		if plan.refusal == nil {
			plan.refusal = plan.verdicts[i].Refusal
		}
	}
	return kept
}

// keep puts the previous definitions of kept in place of their
// pipelines, before anything starts, and remembers why for /readyz.
func (df *dataflow) keep(kept map[string]*stages.Plan, plan rolloverPlan) error {
	for i, p := range df.pipelines {
		pl, ok := kept[p.Name()]
		if !ok {
			continue
		}
		if err := df.reopen(i, pl); err != nil {
			return err
		}
		delete(kept, p.Name())
	}
	// The rest were removed from the configuration: they run beside it,
	// and take their share of the state budget as an old definition does.
	for _, name := range slices.Sorted(maps.Keys(kept)) {
		np, err := df.newPipeline(kept[name])
		if err != nil {
			return err
		}
		df.keptRemoved = append(df.keptRemoved, kept[name])
		df.mu.Lock()
		df.pipelines = append(df.pipelines, np)
		df.mu.Unlock()
	}
	for _, v := range plan.verdicts {
		if v.Kept {
			df.log.Error("configuration change not applied: pipeline "+strconv.Quote(v.Pipeline)+" keeps running its previous definition",
				"pipeline", v.Pipeline, "why", v.Why)
			df.mu.Lock()
			df.keptPrevious = append(df.keptPrevious, v)
			df.mu.Unlock()
		}
	}
	return nil
}
