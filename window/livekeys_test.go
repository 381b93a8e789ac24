package window

import (
	"testing"

	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// TestLiveKeys: a key is live from its first window until its last one is
// purged (a count-window key for good), on both stores; births and deaths
// are reported once each, and Load finds the same set in a StateStore's
// backend.
func TestLiveKeys(t *testing.T) {
	type reading struct {
		key string
		t   int64
	}
	tests := []struct {
		name     string
		assigner Assigner
		lateness int64
		readings []reading
		liveMid  int   // live keys after the readings
		wm       int64 // watermark then
		liveEnd  int
	}{
		{"tumbling", Tumbling(10, 0, true), 0, []reading{{"a", 1}, {"b", 2}, {"a", 12}, {"c", 15}}, 3, 9, 2},
		{"tumbling, all purged", Tumbling(10, 0, true), 0, []reading{{"a", 1}, {"b", 2}, {"a", 12}}, 2, 100, 0},
		{"allowed lateness keeps state", Tumbling(10, 0, true), 50, []reading{{"a", 1}, {"b", 2}}, 2, 20, 2},
		{"paned sliding", Sliding(30, 10, 0, true), 0, []reading{{"a", 1}, {"b", 25}, {"a", 41}}, 2, 60, 1},
		{"session", Session(10, true), 0, []reading{{"a", 1}, {"a", 5}, {"b", 30}}, 2, 20, 1},
		{"count windows: keys stay", CountTumbling(2), 0, []reading{{"a", 1}, {"a", 2}, {"b", 3}}, 2, 100, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := Spec{Assigner: tt.assigner, AllowedLateness: tt.lateness, Aggs: []AggSpec{{Func: aggregate.Count, Arg: -1}}}
			be := state.NewMemory()
			ss, err := NewStateStore(be, "op", []aggregate.Func{aggregate.Count})
			if err != nil {
				t.Fatal(err)
			}
			for _, store := range []Store{NewMemoryStore(), ss} {
				lk := NewLiveKeys(store)
				births, deaths := 0, 0
				lk.OnBirth, lk.OnDeath = func() { births++ }, func() { deaths++ }
				op, err := NewOperator(spec, lk)
				if err != nil {
					t.Fatal(err)
				}
				var out Output
				for _, r := range tt.readings {
					op.Process(&Element{Key: []byte(r.key), KeyGroup: state.KeyGroup([]byte(r.key), 128), Time: r.t}, &out)
				}
				if lk.Len() != tt.liveMid || births != tt.liveMid {
					t.Errorf("%T: %d live keys, %d births after the readings; want %d", store, lk.Len(), births, tt.liveMid)
				}
				op.AdvanceWatermark(tt.wm, &out)
				if lk.Len() != tt.liveEnd || births-deaths != tt.liveEnd {
					t.Errorf("%T: %d live keys, %d births, %d deaths at watermark %d; want %d live", store, lk.Len(), births, deaths, tt.wm, tt.liveEnd)
				}
				if s, ok := store.(*StateStore); ok {
					fresh := NewLiveKeys(s)
					n, err := fresh.Load(s)
					if err != nil || n != lk.Len() {
						t.Errorf("Load: %d keys, %v; want %d", n, err, lk.Len())
					}
					for k := range lk.keys {
						if !fresh.Live([]byte(k)) {
							t.Errorf("Load misses key %q", k)
						}
					}
				}
			}
		})
	}
}

// TestLiveKeys_Pending: a birth the caller reserved for is not reported.
func TestLiveKeys_Pending(t *testing.T) {
	lk := NewLiveKeys(NewMemoryStore())
	births := 0
	lk.OnBirth = func() { births++ }
	op, err := NewOperator(Spec{Assigner: Tumbling(10, 0, true), Aggs: []AggSpec{{Func: aggregate.Count, Arg: -1}}}, lk)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	lk.Pending = true
	op.Process(&Element{Key: []byte("a"), Time: 1}, &out)
	if lk.Pending || births != 0 || !lk.Live([]byte("a")) {
		t.Fatalf("pending %v, births %d, live %v", lk.Pending, births, lk.Live([]byte("a")))
	}
	op.Process(&Element{Key: []byte("b"), Time: 1}, &out)
	if births != 1 {
		t.Fatalf("births %d, want 1", births)
	}
}
