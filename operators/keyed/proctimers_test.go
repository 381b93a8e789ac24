package keyed

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state"
)

// procHost is per-key logic of the kind absence on processing time needs,
// on an Operator in arrival order: every reading moves its key's
// processing-time timer to its arrival + 1 s on a fake clock; the timers
// log what fires.
type procHost struct {
	t     *testing.T
	ops   []*Operator
	clock int64
	last  map[string]int64
	fired []string
}

func (h *procHost) start(bes ...state.Backend) {
	h.ops = h.ops[:0]
	for _, be := range bes {
		op, err := New(be, Options{Order: Arrival})
		if err != nil {
			h.t.Fatal(err)
		}
		op.OnProcessingTimer(func(_ uint16, key []byte, at int64) error {
			h.fired = append(h.fired, fmt.Sprintf("%s@%d", key, at))
			return nil
		})
		h.ops = append(h.ops, op)
	}
}

// op is the operator of key's subtask (key groups split evenly).
func (h *procHost) op(key string) *Operator {
	kg := state.KeyGroup([]byte(key), 128)
	for i := range h.ops {
		if r, _ := state.SubtaskKeyGroups(i, len(h.ops), 128); r.Contains(kg) {
			return h.ops[i]
		}
	}
	h.t.Fatalf("no subtask for key group %d", kg)
	return nil
}

func (h *procHost) read(key string) {
	op := h.op(key)
	r := Reading{Key: []byte(key), KeyGroup: state.KeyGroup([]byte(key), 128), Time: h.clock, Payload: []byte(`{}`)}
	_, err := op.Process(&r, math.MinInt64, func(r *Reading) error {
		if t0, ok := h.last[string(r.Key)]; ok {
			if err := op.DeleteProcessingTimer(t0 + 1000); err != nil {
				return err
			}
		}
		h.last[string(r.Key)] = h.clock
		return op.RegisterProcessingTimer(h.clock + 1000)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// advance moves every subtask's processing time to the clock and returns
// what fired, in order per subtask.
func (h *procHost) advance() string {
	h.fired = h.fired[:0]
	for _, op := range h.ops {
		if err := op.AdvanceProcessingTime(h.clock); err != nil {
			h.t.Fatal(err)
		}
	}
	return strings.Join(h.fired, " ")
}

// TestProcessingTimers_FakeClock drives processing-time timers with a fake
// clock: they fire when AdvanceProcessingTime reaches them, in time order,
// never before, and not on the watermark; they are state: after a
// checkpoint and a restore (at the same or another parallelism, by key
// group) those whose time passed while the agent was down fire at the first
// AdvanceProcessingTime, the others when their time comes.
func TestProcessingTimers_FakeClock(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parallelism int
		downUntil   int64  // the clock at the restore
		overdue     string // what fires at once after the restore
		later       string // what fires at 10 s
	}{
		{"restored at once", 1, 3000, "", "c@3500 b@3900"},
		{"restored after downtime", 1, 3700, "c@3500", "b@3900"},
		// b and c fall in different subtasks; subtask 0 (b's) fires first.
		{"restored after downtime, at parallelism 2", 2, 9000, "b@3900 c@3500", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{CacheBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			h := &procHost{t: t, last: map[string]int64{}}
			h.start(be)
			step := func(clock int64, want string) {
				t.Helper()
				h.clock = clock
				if got := h.advance(); got != want {
					t.Fatalf("clock %d: fired %q, want %q", clock, got, want)
				}
			}
			h.clock = 1000
			h.read("a")
			h.clock = 1500
			h.read("b")
			h.clock = 1800
			h.read("a") // a's timer moves from 2000 to 2800
			step(1999, "")
			if err := h.ops[0].AdvanceWatermark(math.MaxInt64, nil); err != nil {
				t.Fatal(err)
			}
			step(2000, "") // the watermark fired nothing either
			step(2600, "b@2500")
			h.clock = 2500
			h.read("c")
			h.clock = 2900
			h.read("b")
			step(3000, "a@2800")

			// Checkpoint: the timers of c (3500) and b (3900) are in it.
			snap, err := be.Snapshot(true)
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Close()
			var bes []state.Backend
			for range tc.parallelism {
				bes = append(bes, state.NewMemory())
			}
			h.start(bes...)
			for i, m := range bes {
				kgs, _ := state.SubtaskKeyGroups(i, tc.parallelism, 128)
				if err := m.Restore(snap.Entries, state.RestoreOptions{KeyGroups: &kgs}); err != nil {
					t.Fatal(err)
				}
			}
			step(tc.downUntil, tc.overdue)
			step(10_000, tc.later)
		})
	}
}
