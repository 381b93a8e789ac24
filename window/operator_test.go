package window

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/eddy-edge/eddy/window/aggregate"
)

func TestNewOperator_Invalid(t *testing.T) {
	count := []AggSpec{{Func: aggregate.Count, Arg: -1}}
	tests := []struct {
		name string
		spec Spec
	}{
		{"no assigner", Spec{Aggs: count}},
		{"zero size", Spec{Assigner: Tumbling(0, 0, true), Aggs: count}},
		{"zero slide", Spec{Assigner: Sliding(10, 0, 0, true), Aggs: count}},
		{"zero gap", Spec{Assigner: Session(0, true), Aggs: count}},
		{"zero count", Spec{Assigner: CountTumbling(0), Aggs: count}},
		{"negative lateness", Spec{Assigner: Global(), AllowedLateness: -1, Aggs: count}},
		{"no aggregates", Spec{Assigner: Global()}},
		{"invalid func", Spec{Assigner: Global(), Aggs: []AggSpec{{Arg: 0}}}},
		{"sum without argument", Spec{Assigner: Global(), Aggs: []AggSpec{{Func: aggregate.Sum, Arg: -1}}}},
		{"percentile out of range", Spec{Assigner: Global(), Aggs: []AggSpec{{Func: aggregate.Percentile, Arg: 0, Q: 1.5}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewOperator(tt.spec, NewMemoryStore()); !errors.Is(err, ErrBadSpec) {
				t.Fatalf("err = %v, want ErrBadSpec", err)
			}
		})
	}
	if _, err := NewOperator(Spec{Assigner: Global(), Aggs: count}, nil); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("nil store: %v", err)
	}
}

// The operator copies what it keeps: changing the element's key and values
// after Process changes nothing, and firings own their key bytes.
func TestOperator_CopiesElement(t *testing.T) {
	op, err := NewOperator(Spec{Assigner: Tumbling(10, 0, true), Aggs: []AggSpec{{Func: aggregate.Sum, Arg: 0}}}, NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	key, vals := []byte("k1"), []float64{5}
	var out Output
	op.Process(&Element{Key: key, Time: 1, Values: vals}, &out)
	key[1], vals[0] = '9', 100
	op.AdvanceWatermark(9, &out)
	if len(out.Firings) != 1 || string(out.Firings[0].Key) != "k1" || out.Firings[0].Values[0] != 5 {
		t.Fatalf("firings %+v", out.Firings)
	}
	out.Reset()
	if len(out.Firings) != 0 {
		t.Fatal("Reset kept firings")
	}
}

// Steady state: a reading into an open window, and a whole cycle of window
// creation, firing and purge, allocate nothing.
func TestOperator_SteadyStateAllocs(t *testing.T) {
	for _, a := range []Assigner{Tumbling(1000, 0, true), Sliding(3000, 1000, 0, true), Session(500, true), CountSliding(4, 2)} {
		t.Run(a.String(), func(t *testing.T) {
			op, err := NewOperator(Spec{Assigner: a, Aggs: benchAggs}, NewMemoryStore())
			if err != nil {
				t.Fatal(err)
			}
			keys, groups := benchKeys(100)
			var out Output
			e := Element{Values: []float64{1}}
			ts := int64(0)
			round := func() {
				for i := range keys {
					e.Key, e.KeyGroup, e.Time = keys[i], groups[i], ts
					op.Process(&e, &out)
				}
				ts += 700
				op.AdvanceWatermark(ts-1000, &out)
				out.Reset()
			}
			for range 50 {
				round()
			}
			if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
				t.Fatalf("%v allocations per round of %d readings", allocs, len(keys))
			}
		})
	}
}

// Random streams against a naive model of Flink's rules for tumbling and
// sliding windows: verdicts and the last firing of every (key, window) agree.
func TestOperator_MatchesNaiveModel(t *testing.T) {
	seed := uint64(1129)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 5))
	for iter := range 300 {
		size := int64(1 + r.IntN(20))
		slide := int64(1 + r.IntN(25))
		off := int64(r.IntN(30)) - 15
		lateness := int64(r.IntN(3)) * int64(r.IntN(15))
		a := Sliding(size, slide, off, true)
		if r.IntN(3) == 0 {
			a, slide = Tumbling(size, off, true), size
		}
		spec := Spec{Assigner: a, AllowedLateness: lateness, Aggs: []AggSpec{{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0}}}
		op, err := NewOperator(spec, NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		type kw struct {
			key string
			w   Window
		}
		model := map[kw][2]float64{}
		last := map[kw][2]float64{}
		var out Output
		wm := int64(math.MinInt64)
		collect := func() {
			for _, f := range out.Firings {
				last[kw{string(f.Key), f.Window}] = [2]float64{f.Values[0], f.Values[1]}
			}
			out.Reset()
		}
		for range 300 {
			if r.IntN(5) == 0 {
				w := int64(r.IntN(200)) - 50
				op.AdvanceWatermark(w, &out)
				wm = max(wm, w)
				collect()
				continue
			}
			key := fmt.Sprint(r.IntN(3))
			ts := int64(r.IntN(200)) - 50
			v := float64(r.IntN(10))
			got := op.Process(&Element{Key: []byte(key), Time: ts, Values: []float64{v}}, &out)
			collect()
			// Naive: every start s ≡ off (mod slide) with ts−size < s ≤ ts.
			want, any := Late, false
			for s := ts - size + 1; s <= ts; s++ {
				if ((s-off)%slide+slide)%slide != 0 {
					continue
				}
				any = true
				w := Window{s, s + size}
				if w.End-1+lateness <= wm {
					continue
				}
				want = Accepted
				m := model[kw{key, w}]
				model[kw{key, w}] = [2]float64{m[0] + 1, m[1] + v}
			}
			if !any && ts+lateness > wm {
				want = Unassigned
			}
			if got != want {
				t.Fatalf("iter %d (%v, L=%d): reading %s@%d with wm %d: verdict %v, want %v", iter, a, lateness, key, ts, wm, got, want)
			}
		}
		op.AdvanceWatermark(math.MaxInt64, &out)
		collect()
		if len(last) != len(model) {
			t.Fatalf("iter %d: %d windows fired, model has %d", iter, len(last), len(model))
		}
		for k, m := range model {
			if last[k] != m {
				t.Fatalf("iter %d (%v, L=%d): %v last firing %v, want %v", iter, a, lateness, k, last[k], m)
			}
		}
		if s := op.Stats(); s.OpenWindows != 0 || s.PendingTimers != 0 {
			t.Fatalf("iter %d: state left after end of input: %+v", iter, s)
		}
	}
}
