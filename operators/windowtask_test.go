package operators

import (
	"math"
	"slices"
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
