package operators

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// A result value beyond float64 is counted as an overflow, named by its
// aggregate; one within range, or null for want of values, is not.
func TestWindowTask_CountsOverflowedValues(t *testing.T) {
	const big = 1.797e308
	tests := []struct {
		name   string
		values []float64 // of key "k", in one window
		want   int64
		aggs   []string
	}{
		{"sum and avg overflow", []float64{big, big}, 2, []string{"sum", "avg"}},
		{"negative overflow", []float64{-big, -big}, 2, []string{"sum", "avg"}},
		{"within range", []float64{big, -big}, 0, nil},
		{"nulls only", []float64{math.NaN()}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := []string{"n", "sum", "avg", "max"}
			op, err := window.NewOperator(window.Spec{Assigner: window.Tumbling(1000, 0, true), Aggs: []window.AggSpec{
				{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0}, {Func: aggregate.Avg, Arg: 0}, {Func: aggregate.Max, Arg: 0},
			}}, window.NewMemoryStore())
			if err != nil {
				t.Fatal(err)
			}
			task := NewWindowTask("p", "dev", names, op)
			b := stream.NewBatch(1)
			for i, v := range tt.values {
				b.Append([]byte("k"), 1, int64(100+i), []float64{v}, []byte(`{}`), uint64(i+1))
			}
			task.Process(b, false)
			task.AdvanceWatermark(1 << 62)
			if d := task.TakeResults(); d.Len() != 1 {
				t.Fatalf("%d firings, want 1", d.Len())
			}
			if task.Overflowed != tt.want {
				t.Errorf("Overflowed = %d, want %d", task.Overflowed, tt.want)
			}
			if tt.want > 0 && (!slices.Equal(task.LastOverflow.Aggregates, tt.aggs) || task.LastOverflow.Key != "k" || task.LastOverflow.End != 1000) {
				t.Errorf("LastOverflow = %+v, want %v of key k, window ending at 1000", task.LastOverflow, tt.aggs)
			}
		})
	}
}

// A processing-time window's results depend on the readings' arrivals
// only: the same readings, fed live (a batch each, with processing time
// ticking on between them, as the prepare stage's wall clock does) or
// replayed (one batch, no tick, as after a restore), give the same
// firings in the same order, early ones too (every 500 ms: what they hold
// depends on when they fire between the readings). A reading at a
// window's last millisecond belongs to it.
func TestWindowTask_ProcessingTimeFollowsArrivals(t *testing.T) {
	arrivals := []int64{1_000, 1_500, 1_999, 2_000, 2_700, 5_100, 5_999}
	run := func(live bool) []string {
		op, err := window.NewOperator(window.Spec{Assigner: window.Tumbling(1000, 0, false), EarlyEvery: 500, Aggs: []window.AggSpec{
			{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0},
		}}, window.NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		task := NewWindowTask("p", "dev", []string{"n", "sum"}, op)
		var got []string
		take := func() {
			if d := task.TakeResults(); d != nil {
				for _, it := range d.Items() {
					got = append(got, string(it.Payload))
				}
			}
		}
		b := stream.NewBatch(1)
		for i, a := range arrivals {
			b.Append([]byte("k"), 1, a, []float64{float64(i)}, []byte(`{}`), uint64(i+1))
			b.AppendArrival(a)
			if live {
				task.Process(b, false)
				b.Release()
				take()
				task.AdvanceProcessingTime(a + 50) // the next tick
				take()
				b = stream.NewBatch(1)
			}
		}
		if !live {
			task.Process(b, false)
			take()
		}
		task.AdvanceProcessingTime(7_000) // caught up: the wall clock moves on
		take()
		return got
	}
	live, replay := run(true), run(false)
	if !slices.Equal(live, replay) {
		t.Fatalf("replayed firings differ from live ones:\nlive   %q\nreplay %q", live, replay)
	}
	var finals []string
	for _, f := range live {
		if strings.Contains(f, `"kind":"final"`) {
			finals = append(finals, f)
		}
	}
	if len(finals) != 3 || len(live) == len(finals) {
		t.Fatalf("%d firings, %d of them final; want early ones and 3 finals (windows ending at 2000, 3000, 6000): %q", len(live), len(finals), live)
	}
	for i, want := range []string{`"n":3,"sum":3`, `"n":2,"sum":7`, `"n":2,"sum":11`} {
		if !strings.Contains(finals[i], want) {
			t.Errorf("final %d: %s, want %s", i, finals[i], want)
		}
	}
}

// Moving processing time on per reading costs no allocation: a batch of
// readings with arrivals into an open processing-time window allocates
// nothing once the window exists.
func TestWindowTask_ArrivalsAllocateNothing(t *testing.T) {
	op, err := window.NewOperator(window.Spec{Assigner: window.Tumbling(60_000, 0, false), EarlyEvery: 10_000, Aggs: []window.AggSpec{
		{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0},
	}}, window.NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	task := NewWindowTask("p", "dev", []string{"n", "sum"}, op)
	b := stream.NewBatch(1)
	for i := 0; i < 512; i++ {
		b.Append([]byte("k"), 1, int64(1_000+i), []float64{1}, []byte(`{}`), uint64(i+1))
		b.AppendArrival(int64(1_000 + i))
	}
	task.Process(b, false) // the window and its timers exist from here on
	if allocs := testing.AllocsPerRun(100, func() { task.Process(b, false) }); allocs != 0 {
		t.Fatalf("%v allocations per batch of 512 readings with arrivals, want 0", allocs)
	}
}
