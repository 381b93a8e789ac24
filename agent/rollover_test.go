package agent

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"testing"

	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
)

// TestPlanRollovers: from a checkpoint of pipelines "a" and "b", which
// pipelines roll over, which are renames, which removed ones are
// refused, and which names of state the plan accounts for.
func TestPlanRollovers(t *testing.T) {
	shapeA := []byte(`{"window":"tumbling event 10s 0s 0s 0s 0 0 0s 0s 0","key":"k","source":"in","aggregates":["n = count() q=0"]}`)
	shapeB := []byte(`{"window":"sliding event 20s 10s 0s 0s 0 0 0s 0s 0","key":"k","source":"in","aggregates":["n = count() q=0"]}`)
	changedA := []byte(`{"window":"tumbling event 10s 0s 0s 0s 0 0 0s 0s 0","key":"k","source":"in","aggregates":["n = count() q=0","m = max(event.v) q=0"]}`)
	u64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	m := &checkpoint.Manifest{ID: 3, Files: []checkpoint.FileRef{{Pipeline: "a"}, {Pipeline: "b"}}, Extra: map[string][]byte{
		"shape/a": shapeA, "definition/a": []byte(`pipeline "a" {}`), "watermark/a/0": u64(12_000), "maxtime/a": u64(15_000),
		"shape/b": shapeB, "definition/b": []byte(`pipeline "b" {}`), "watermark/b/0": u64(12_000), "maxtime/b": u64(15_000),
	}}
	never := func(string) bool { return false }
	verdict := func(name string, shape []byte) stages.RolloverVerdict {
		return stages.CheckRollover(m, name, shape, false, never, 0)
	}
	for _, c := range []struct {
		name       string
		configured []stages.RolloverVerdict
		// want: per pipeline in the plan, its Text() ("refuse" for a
		// refusal); known: the names of state accounted for.
		want  map[string]string
		known []string
	}{
		{name: "unchanged", configured: []stages.RolloverVerdict{verdict("a", shapeA), verdict("b", shapeB)}, want: map[string]string{}},
		{name: "a changed", configured: []stages.RolloverVerdict{verdict("a", changedA), verdict("b", shapeB)},
			want:  map[string]string{"a": "roll over: aggregates changed (m added): its open windows finish as before; windows from 1970-01-01T00:00:20Z use the new aggregates"},
			known: []string{"a--old-" + stages.DefinitionHash(shapeA)}},
		{name: "a renamed c", configured: []stages.RolloverVerdict{verdict("c", shapeA), verdict("b", shapeB)},
			want: map[string]string{
				"a": "roll over: removed from the configuration: its open windows finish as before; it takes no reading from 1970-01-01T00:00:20Z",
				"c": `start empty (renamed from "a"): windows from 1970-01-01T00:00:20Z are its`},
			known: []string{"a--old-" + stages.DefinitionHash(shapeA), "a"}},
		{name: "b removed: a sliding window cannot roll out", configured: []stages.RolloverVerdict{verdict("a", shapeA)},
			want: map[string]string{"b": "refuse"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := planRollovers(m, c.configured, never, 0, false)
			got := map[string]string{}
			for _, v := range plan.verdicts {
				if v.Refusal != nil {
					got[v.Pipeline] = "refuse"
				} else {
					got[v.Pipeline] = v.Text()
				}
			}
			b1, _ := json.Marshal(got)
			b2, _ := json.Marshal(c.want)
			if string(b1) != string(b2) {
				t.Fatalf("plan\n%s\nwant\n%s", b1, b2)
			}
			refused := false
			for _, v := range c.want {
				refused = refused || v == "refuse"
			}
			if (plan.refusal != nil) != refused {
				t.Fatalf("refusal %v", plan.refusal)
			}
			slices.Sort(plan.known)
			slices.Sort(c.known)
			if !slices.Equal(plan.known, c.known) {
				t.Fatalf("known %v, want %v", plan.known, c.known)
			}
		})
	}
	if plan := planRollovers(m, []stages.RolloverVerdict{verdict("a", changedA)}, never, 0, true); len(plan.verdicts) != 0 {
		t.Fatalf("--allow-non-restored-state rolls over: %+v", plan.verdicts)
	}
}

// TestApplyRollovers_StateCacheShared: an old definition running beside
// its new one takes its share of state { cache } from the same budget:
// every stateful subtask, the old instance's included, gets the budget
// divided by all of them, and their shares add up to no more than it.
func TestApplyRollovers_StateCacheShared(t *testing.T) {
	const src = `
agent {
  device_id   = "share"
  data_dir    = "%DATA%"
  parallelism = 2
}
state { cache = "64MiB" }
source "file" "in" { path = "in.jsonl" }
sink "file" "out" { path = "out.jsonl" }
pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "10s"
  }
  aggregate { n = count() }
  to = [sink.file.out]
}
pipeline "counts" {
  from = source.file.in
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "1m"
  }
  aggregate { n = count() }
  to = [sink.file.out]
}
`
	a := mustBuildAgent(t, src, false)
	const budget = 64 << 20
	for _, p := range a.flow.pipelines {
		if got := p.StateCache(); got != budget/4 {
			t.Fatalf("before the rollover: pipeline %q subtask share %d, want %d", p.Name(), got, budget/4)
		}
	}
	block := `pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "5s"
  }
  aggregate { n = count() }
  to = [sink.file.out]
}`
	roll := &stages.Rollover{Pipeline: "sums", Old: "sums--old-abcd", OldHash: "abcd", Block: block, Cut: 20_000, RetireAt: 19_999, ProcessingTime: true,
		Changes: "window changed (size 5s → 10s)"}
	added, err := a.flow.applyRollovers(rolloverPlan{verdicts: []stages.RolloverVerdict{{Pipeline: "sums", Roll: roll, Fresh: true, Since: 20_000}}})
	if err != nil || !added {
		t.Fatalf("applyRollovers: added %v, %v", added, err)
	}
	var names []string
	var total int64
	for _, p := range a.flow.pipelines {
		names = append(names, p.Name())
		if got := p.StateCache(); got != budget/6 {
			t.Errorf("pipeline %q subtask share %d, want %d (the budget over 6 subtasks)", p.Name(), got, budget/6)
		}
		total += p.StateCache() * int64(p.Parallelism())
	}
	if !slices.Equal(names, []string{"sums", "counts", "sums--old-abcd"}) {
		t.Fatalf("pipelines %v", names)
	}
	if total > budget {
		t.Fatalf("the subtasks' shares add up to %d, over the budget %d", total, budget)
	}
	if len(a.flow.backends) != 6 {
		t.Fatalf("%d state backends open, want 6: the pipelines reopened on the smaller share left theirs open", len(a.flow.backends))
	}
}
