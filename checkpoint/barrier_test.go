package checkpoint

import (
	"fmt"
	"slices"
	"testing"
)

// alignStep is one event fed to an Aligner and what must follow it.
type alignStep struct {
	ev      string   // "b<input>:<id>" barrier, "e<input>" end of input
	snap    uint64   // Decision.Snapshot
	aborted []uint64 // Decision.Aborted
	blocked string   // Blocked(i) for every input after the event, e.g. "100"
}

func runAlign(t *testing.T, mode Mode, inputs int, steps []alignStep) {
	t.Helper()
	a := NewAligner(mode, inputs)
	for k, s := range steps {
		var d Decision
		var i int
		var id uint64
		if _, err := fmt.Sscanf(s.ev, "b%d:%d", &i, &id); err == nil {
			d = a.Barrier(i, id)
		} else if _, err := fmt.Sscanf(s.ev, "e%d", &i); err == nil {
			d = a.EndOfInput(i)
		} else {
			t.Fatalf("bad event %q", s.ev)
		}
		if d.Snapshot != s.snap || !slices.Equal(d.Aborted, s.aborted) {
			t.Fatalf("step %d (%s): decision %+v, want snapshot %d aborted %v", k, s.ev, d, s.snap, s.aborted)
		}
		blocked := ""
		for i := range inputs {
			blocked += map[bool]string{false: "0", true: "1"}[a.Blocked(i)]
		}
		if blocked != s.blocked {
			t.Fatalf("step %d (%s): blocked %s, want %s", k, s.ev, blocked, s.blocked)
		}
	}
}

// docs/architecture.md "Checkpoints" 2 (Chandy–Lamport alignment): an input that delivered
// barrier n is held until every input did, then the task snapshots and
// forwards n.
func TestAligner_ExactlyOnce(t *testing.T) {
	tests := []struct {
		name   string
		inputs int
		steps  []alignStep
	}{
		{"single input snapshots at once", 1, []alignStep{
			{ev: "b0:1", snap: 1, blocked: "0"},
			{ev: "b0:2", snap: 2, blocked: "0"},
		}},
		{"three inputs align", 3, []alignStep{
			{ev: "b1:1", blocked: "010"},
			{ev: "b0:1", blocked: "110"},
			{ev: "b2:1", snap: 1, blocked: "000"},
			{ev: "b2:2", blocked: "001"},
			{ev: "b0:2", blocked: "101"},
			{ev: "b1:2", snap: 2, blocked: "000"},
		}},
		{"newer barrier aborts the older alignment", 3, []alignStep{
			{ev: "b0:1", blocked: "100"},
			{ev: "b1:1", blocked: "110"},
			{ev: "b2:2", aborted: []uint64{1}, blocked: "001"},
			{ev: "b0:2", blocked: "101"},
			{ev: "b1:2", snap: 2, blocked: "000"},
		}},
		{"late barrier of an aborted checkpoint is ignored", 2, []alignStep{
			{ev: "b0:1", blocked: "10"},
			{ev: "b1:2", aborted: []uint64{1}, blocked: "01"},
			{ev: "b0:2", snap: 2, blocked: "00"},
			{ev: "b1:1", blocked: "00"},
		}},
		{"ended input counts as aligned", 3, []alignStep{
			{ev: "e1", blocked: "000"},
			{ev: "b0:1", blocked: "100"},
			{ev: "b2:1", snap: 1, blocked: "000"},
		}},
		{"end of the last input completes the alignment", 2, []alignStep{
			{ev: "b0:1", blocked: "10"},
			{ev: "e1", snap: 1, blocked: "00"},
			{ev: "b0:2", snap: 2, blocked: "00"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runAlign(t, ExactlyOnce, tt.inputs, tt.steps) })
	}
}

// at_least_once skips alignment: nothing is blocked, the snapshot is taken
// when the last input delivers the barrier, and an older checkpoint is
// aborted when a newer one completes first.
func TestAligner_AtLeastOnce(t *testing.T) {
	tests := []struct {
		name   string
		inputs int
		steps  []alignStep
	}{
		{"never blocks", 3, []alignStep{
			{ev: "b1:1", blocked: "000"},
			{ev: "b0:1", blocked: "000"},
			{ev: "b2:1", snap: 1, blocked: "000"},
		}},
		{"two checkpoints overlap", 2, []alignStep{
			{ev: "b0:1", blocked: "00"},
			{ev: "b0:2", blocked: "00"},
			{ev: "b1:1", snap: 1, blocked: "00"},
			{ev: "b1:2", snap: 2, blocked: "00"},
		}},
		{"newer completes first and aborts the older", 2, []alignStep{
			{ev: "b0:1", blocked: "00"},
			{ev: "b0:2", blocked: "00"},
			{ev: "b1:2", snap: 2, aborted: []uint64{1}, blocked: "00"},
			{ev: "b1:1", blocked: "00"},
		}},
		{"ended input", 2, []alignStep{
			{ev: "b0:1", blocked: "00"},
			{ev: "e1", snap: 1, blocked: "00"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runAlign(t, AtLeastOnce, tt.inputs, tt.steps) })
	}
}

func TestAligner_BarrierOnBlockedInputPanics(t *testing.T) {
	a := NewAligner(ExactlyOnce, 2)
	a.Barrier(0, 1)
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	a.Barrier(0, 2)
}

func TestAligner_NoAllocInSteadyState(t *testing.T) {
	a := NewAligner(ExactlyOnce, 4)
	id := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		id++
		for i := range 4 {
			a.Barrier(i, id)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per checkpoint, want 0", allocs)
	}
}
