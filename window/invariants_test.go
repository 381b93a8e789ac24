package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// Random specs (every assigner and trigger option) and random inputs keep
// the operator's invariants:
//  1. the firings of a (key, window) are numbered 0, 1, 2, … without gaps;
//  2. no Early firing follows the Final firing of a window;
//  3. count() never decreases between firings of a window (full aggregates);
//  4. after end of input (watermark and processing time at max) no time
//     window state and no timer is left.
func TestOperator_Invariants(t *testing.T) {
	seed := uint64(77)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	for iter := range 500 {
		eventTime := r.IntN(2) == 0
		size := int64(1 + r.IntN(30))
		var a Assigner
		switch r.IntN(5) {
		case 0:
			a = Tumbling(size, int64(r.IntN(10)), eventTime)
		case 1:
			a = Sliding(size, int64(1+r.IntN(20)), int64(r.IntN(10)), eventTime)
		case 2:
			a = Session(size, eventTime)
		case 3:
			a = Global()
		case 4:
			a = CountSliding(size%7+1, int64(1+r.IntN(4)))
		}
		spec := Spec{
			Assigner:        a,
			AllowedLateness: int64(r.IntN(2) * r.IntN(30)),
			EarlyEvery:      int64(r.IntN(2) * (1 + r.IntN(10))),
			TriggerCount:    int64(r.IntN(2) * r.IntN(4)),
			Aggs:            []AggSpec{{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Median, Arg: 0}, {Func: aggregate.Stddev, Arg: 0}},
		}
		op, err := NewOperator(spec, NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		type kw struct {
			key string
			w   Window
		}
		type seen struct {
			next  int
			final bool
			count float64
		}
		state := map[kw]*seen{}
		var out Output
		where := func() string {
			return fmt.Sprintf("iter %d %v L=%d early=%d n=%d", iter, a, spec.AllowedLateness, spec.EarlyEvery, spec.TriggerCount)
		}
		check := func() {
			for _, f := range out.Firings {
				k := kw{string(f.Key), f.Window}
				s := state[k]
				if s == nil {
					s = &seen{}
					state[k] = s
				}
				if f.Seq != s.next {
					t.Fatalf("%s: %v fired #%d, want #%d", where(), k, f.Seq, s.next)
				}
				if f.Kind == Early && s.final {
					t.Fatalf("%s: %v early after final", where(), k)
				}
				if f.Values[0] < s.count {
					t.Fatalf("%s: %v count went from %v to %v", where(), k, s.count, f.Values[0])
				}
				s.next++
				s.final = s.final || f.Kind == Final
				s.count = f.Values[0]
			}
			out.Reset()
		}
		now, wm := int64(0), int64(-50)
		for range 300 {
			switch r.IntN(8) {
			case 0:
				wm += int64(r.IntN(15))
				op.AdvanceWatermark(wm, &out)
			case 1:
				now += int64(r.IntN(15))
				op.AdvanceProcessingTime(now, &out)
			default:
				ts := wm + int64(r.IntN(60)) - 20
				if !eventTime {
					ts = now + int64(r.IntN(5))
				}
				v := float64(r.IntN(100)) - 50
				if r.IntN(10) == 0 {
					v = math.NaN()
				}
				op.Process(&Element{Key: []byte(fmt.Sprint(r.IntN(4))), Time: ts, Values: []float64{v}}, &out)
			}
			check()
		}
		op.AdvanceWatermark(math.MaxInt64, &out)
		check()
		op.AdvanceProcessingTime(math.MaxInt64, &out)
		check()
		if s := op.Stats(); a.Domain() != CountDomain && (s.OpenWindows != 0 || s.PendingTimers != 0) {
			t.Fatalf("%s: state left after end of input: %+v", where(), s)
		}
	}
}
