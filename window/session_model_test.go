package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// modelSession is one session of the naive model.
type modelSession struct {
	w      Window
	n, sum float64
}

// Random streams against a naive, store-free model of Flink's event-time
// session rules (merge on overlap or touch, lateness judged on the merged
// window, late updates, cleanup at end−1+L): verdicts and the last firing of
// every (key, window) agree.
func TestOperator_SessionsMatchNaiveModel(t *testing.T) {
	seed := uint64(4242)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 9))
	for iter := range 300 {
		gap := int64(1 + r.IntN(15))
		lateness := int64(r.IntN(2)) * int64(r.IntN(20))
		spec := Spec{Assigner: Session(gap, true), AllowedLateness: lateness,
			Aggs: []AggSpec{{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0}}}
		op, err := NewOperator(spec, NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		type kw struct {
			key string
			w   Window
		}
		model := map[string][]modelSession{}
		want, got := map[kw][2]float64{}, map[kw][2]float64{}
		var out Output
		wm := int64(math.MinInt64)
		collect := func() {
			for _, f := range out.Firings {
				got[kw{string(f.Key), f.Window}] = [2]float64{f.Values[0], f.Values[1]}
			}
			out.Reset()
		}
		advance := func(w int64) {
			if w <= wm {
				return
			}
			wm = w
			for key, ss := range model {
				keep := ss[:0]
				for _, s := range ss {
					if s.w.End-1 <= wm {
						want[kw{key, s.w}] = [2]float64{s.n, s.sum} // final (or unchanged)
					}
					if s.w.End-1+lateness > wm {
						keep = append(keep, s)
					}
				}
				model[key] = keep
			}
		}
		for range 200 {
			if r.IntN(6) == 0 {
				w := int64(r.IntN(150)) - 20
				op.AdvanceWatermark(w, &out)
				collect()
				advance(w)
				continue
			}
			key := fmt.Sprint(r.IntN(2))
			ts := int64(r.IntN(150)) - 20
			v := float64(r.IntN(10))
			verdict := op.Process(&Element{Key: []byte(key), Time: ts, Values: []float64{v}}, &out)
			collect()

			merged := modelSession{w: Window{ts, ts + gap}, n: 1, sum: v}
			var rest []modelSession
			joined := false
			for _, s := range model[key] {
				if s.w.Intersects(Window{ts, ts + gap}) {
					merged.w = merged.w.Cover(s.w)
					merged.n += s.n
					merged.sum += s.sum
					joined = true
				} else {
					rest = append(rest, s)
				}
			}
			wantVerdict := Accepted
			if !joined && merged.w.End-1+lateness <= wm {
				wantVerdict = Late
			} else {
				model[key] = append(rest, merged)
				if merged.w.End-1 <= wm {
					want[kw{key, merged.w}] = [2]float64{merged.n, merged.sum} // late update
				}
			}
			if verdict != wantVerdict {
				t.Fatalf("iter %d (gap %d, L %d): %s@%d with wm %d: verdict %v, want %v", iter, gap, lateness, key, ts, wm, verdict, wantVerdict)
			}
		}
		op.AdvanceWatermark(math.MaxInt64, &out)
		collect()
		advance(math.MaxInt64)
		if len(got) != len(want) {
			t.Fatalf("iter %d (gap %d, L %d): %d windows fired, model %d\ngot  %v\nwant %v", iter, gap, lateness, len(got), len(want), got, want)
		}
		for k, w := range want {
			if got[k] != w {
				t.Fatalf("iter %d (gap %d, L %d): %v last firing %v, want %v", iter, gap, lateness, k, got[k], w)
			}
		}
		if s := op.Stats(); s.OpenWindows != 0 || s.PendingTimers != 0 {
			t.Fatalf("iter %d: state left after end of input: %+v", iter, s)
		}
	}
}
