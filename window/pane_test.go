package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/eddy-edge/eddy/window/aggregate"
)

func TestPaneCount(t *testing.T) {
	count := []AggSpec{{Func: aggregate.Count, Arg: -1}}
	for _, c := range []struct {
		name string
		spec Spec
		want int64
	}{
		{"sliding 60s/10s", Spec{Assigner: Sliding(60_000, 10_000, 0, true), Aggs: count}, 6},
		{"with offset and lateness", Spec{Assigner: Sliding(3000, 1000, 500, true), AllowedLateness: 700, Aggs: count}, 3},
		{"slide does not divide size", Spec{Assigner: Sliding(2500, 1000, 0, true), Aggs: count}, 0},
		{"slide = size", Spec{Assigner: Sliding(1000, 1000, 0, true), Aggs: count}, 0},
		{"slide > size", Spec{Assigner: Sliding(1000, 2000, 0, true), Aggs: count}, 0},
		{"processing time", Spec{Assigner: Sliding(3000, 1000, 0, false), Aggs: count}, 3},
		{"trigger count", Spec{Assigner: Sliding(3000, 1000, 0, true), TriggerCount: 2, Aggs: count}, 0},
		{"early firings", Spec{Assigner: Sliding(3000, 1000, 0, true), EarlyEvery: 100, Aggs: count}, 0},
		{"tumbling", Spec{Assigner: Tumbling(1000, 0, true), Aggs: count}, 0},
	} {
		if got := paneCount(c.spec); got != c.want {
			t.Errorf("%s: paneCount = %d, want %d", c.name, got, c.want)
		}
	}
}

// Random streams (late readings, allowed lateness, several keys, watermark
// jumps; a third on processing time, with readings stamped before the
// current processing time) give the same verdicts, the same firings in the same order (kind,
// key, window, Seq) and the same values on a paned operator as on the
// per-window one, on MemoryStore and on StateStore with spilling caches.
// Values are small integers, so sums are exact in any order and every
// aggregate must be equal; stddev is compared to 1e-9 relative (Welford's
// pane-by-pane combination rounds differently).
func TestPanes_MatchPerWindowOperator(t *testing.T) {
	seed := uint64(3011)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	aggs := []AggSpec{
		{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0}, {Func: aggregate.Min, Arg: 0},
		{Func: aggregate.Max, Arg: 0}, {Func: aggregate.Avg, Arg: 0}, {Func: aggregate.First, Arg: 0},
		{Func: aggregate.Last, Arg: 0}, {Func: aggregate.Count, Arg: 0}, {Func: aggregate.Median, Arg: 0},
		{Func: aggregate.Stddev, Arg: 0},
	}
	var funcs []aggregate.Func
	for _, a := range aggs {
		funcs = append(funcs, a.Func)
	}
	iters := 200
	if testing.Short() {
		iters = 40
	}
	for iter := range iters {
		slide := int64(1 + r.IntN(12))
		eventTime := r.IntN(3) != 0
		spec := Spec{
			Assigner:        Sliding(slide*int64(2+r.IntN(6)), slide, int64(r.IntN(20))-10, eventTime),
			AllowedLateness: int64(r.IntN(2) * r.IntN(40)),
			Aggs:            aggs,
		}
		where := fmt.Sprintf("iter %d %v L=%d", iter, spec.Assigner, spec.AllowedLateness)
		ref, err := NewOperator(spec, NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		ref.panes = 0 // the per-window operator
		type sut struct {
			name string
			op   *Operator
			out  Output
		}
		var suts []*sut
		add := func(name string, st Store) {
			op, err := NewOperator(spec, st)
			if err != nil {
				t.Fatal(err)
			}
			if op.panes == 0 {
				t.Fatalf("%s: spec not paned", where)
			}
			suts = append(suts, &sut{name: name, op: op})
		}
		add("memory", NewMemoryStore())
		for _, cache := range []int{0, 1} {
			ss, err := NewStateStoreWith(openTestBolt(t, 2<<10), "op", funcs, StateStoreOptions{CacheBytes: cache, TimerCache: 3})
			if err != nil {
				t.Fatal(err)
			}
			add(fmt.Sprintf("bolt (object cache %d B)", cache), ss)
		}
		var refOut Output
		compare := func(step int) {
			for _, s := range suts {
				if len(s.out.Firings) != len(refOut.Firings) {
					t.Fatalf("%s, step %d, %s: %d firings, per-window operator %d:\n%v\nwant\n%v", where, step, s.name, len(s.out.Firings), len(refOut.Firings), s.out.Firings, refOut.Firings)
				}
				for i, f := range s.out.Firings {
					g := refOut.Firings[i]
					if string(f.Key) != string(g.Key) || f.Window != g.Window || f.Kind != g.Kind || f.Seq != g.Seq {
						t.Fatalf("%s, step %d, %s: firing %d is %s %v %v #%d, want %s %v %v #%d", where, step, s.name, i,
							f.Key, f.Window, f.Kind, f.Seq, g.Key, g.Window, g.Kind, g.Seq)
					}
					for j, v := range f.Values {
						want := g.Values[j]
						same := v == want || math.IsNaN(v) && math.IsNaN(want)
						if funcs[j] == aggregate.Stddev && !same {
							same = math.Abs(v-want) <= 1e-9*math.Max(1, math.Abs(want))
						}
						if !same {
							t.Fatalf("%s, step %d, %s: %v %v %v = %v, want %v", where, step, s.name, f.Key, f.Window, funcs[j], v, want)
						}
					}
				}
				s.out.Reset()
			}
			refOut.Reset()
		}
		wm := int64(-30) // the watermark, or processing time
		for step := range 400 {
			if r.IntN(6) == 0 {
				wm += int64(r.IntN(25))
				if eventTime {
					ref.AdvanceWatermark(wm, &refOut)
				} else {
					ref.AdvanceProcessingTime(wm, &refOut)
				}
				for _, s := range suts {
					if eventTime {
						s.op.AdvanceWatermark(wm, &s.out)
					} else {
						s.op.AdvanceProcessingTime(wm, &s.out)
					}
				}
			} else {
				e := Element{Key: []byte(fmt.Sprint(r.IntN(5))), Time: wm + int64(r.IntN(90)) - 50, Values: []float64{float64(r.IntN(40)) - 20}}
				if r.IntN(8) == 0 {
					e.Values[0] = math.NaN()
				}
				want := ref.Process(&e, &refOut)
				for _, s := range suts {
					if got := s.op.Process(&e, &s.out); got != want {
						t.Fatalf("%s, step %d, %s: reading %s@%d (wm %d): %v, want %v", where, step, s.name, e.Key, e.Time, wm, got, want)
					}
				}
			}
			compare(step)
		}
		ref.AdvanceWatermark(math.MaxInt64, &refOut)
		for _, s := range suts {
			s.op.AdvanceWatermark(math.MaxInt64, &s.out)
		}
		compare(-1)
		rs := ref.Stats()
		for _, s := range suts {
			st := s.op.Stats()
			if st.Accepted != rs.Accepted || st.Late != rs.Late || st.Firings != rs.Firings {
				t.Fatalf("%s, %s: stats %+v, per-window operator %+v", where, s.name, st, rs)
			}
			if st.OpenWindows != 0 || st.PendingTimers != 0 {
				t.Fatalf("%s, %s: state left after end of input: %+v", where, s.name, st)
			}
		}
	}
}
