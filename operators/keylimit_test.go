package operators

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// newLimitedTask returns a window task over tumbling 10 ms windows whose
// keys are bounded by budget.
func newLimitedTask(t *testing.T, budget *KeyBudget, keep bool) *WindowTask {
	t.Helper()
	keys := window.NewLiveKeys(window.NewMemoryStore())
	op, err := window.NewOperator(window.Spec{Assigner: window.Tumbling(10, 0, true),
		Aggs: []window.AggSpec{{Func: aggregate.Count, Arg: -1}}}, keys)
	if err != nil {
		t.Fatal(err)
	}
	task := NewWindowTask("p", "dev", []string{"n"}, op)
	task.LimitKeys(keys, budget, keep)
	return task
}

func batchOf(readings ...string) *stream.Batch {
	b := stream.NewBatch(0)
	for i, r := range readings {
		key, ts, _ := strings.Cut(r, "@")
		var t int64
		for _, c := range ts {
			t = t*10 + int64(c-'0')
		}
		b.Append([]byte(key), state.KeyGroup([]byte(key), 128), t, nil, []byte(`{"k":"`+key+`"}`), uint64(i+1))
	}
	return b
}

// TestWindowTask_KeyLimit: with max_keys 2 over two subtasks, a third key
// is refused (dead-lettered with reason key_limit) in either subtask while
// the live keys keep being taken; once their windows are purged, new keys
// are taken again; a late reading of a new key gives its room back.
func TestWindowTask_KeyLimit(t *testing.T) {
	budget := NewKeyBudget(2)
	t1, t2 := newLimitedTask(t, budget, true), newLimitedTask(t, budget, false)

	t1.Process(batchOf("a@1", "b@2", "c@3", "a@4"), false)
	t2.Process(batchOf("d@1", "e@2"), false)
	if t1.Refused != 1 || t2.Refused != 2 || budget.Live() != 2 {
		t.Fatalf("refused %d and %d, live %d; want 1, 2, 2", t1.Refused, t2.Refused, budget.Live())
	}
	d := t1.TakeRefused()
	if d == nil || d.Len() != 1 || !strings.Contains(string(d.Items()[0].Payload), `"reason":"key_limit"`) ||
		!strings.Contains(string(d.Items()[0].Payload), "max_keys = 2") {
		t.Fatalf("refused dead letters: %+v", d)
	}
	if t2.TakeRefused() != nil {
		t.Error("a task without keepRefused collected dead letters")
	}
	if t1.TakeResults() != nil {
		t.Error("results before the watermark")
	}

	// The windows end: a and b leave, d and e fit.
	t1.AdvanceWatermark(100)
	t2.AdvanceWatermark(100)
	if res := t1.TakeResults(); res == nil || res.Len() != 2 {
		t.Fatalf("results of a and b: %v", res)
	}
	if budget.Live() != 0 {
		t.Fatalf("live %d after every window was purged", budget.Live())
	}
	// Late for every window: no state, and no room kept.
	t2.Process(batchOf("f@5"), false)
	if budget.Live() != 0 || t2.Late != 1 || t2.Refused != 2 {
		t.Fatalf("late reading of a new key: live %d, late %d, refused %d", budget.Live(), t2.Late, t2.Refused)
	}
	t2.Process(batchOf("d@105", "e@106", "g@107"), false)
	if t2.Refused != 3 || budget.Live() != 2 {
		t.Fatalf("refused %d, live %d; want 3, 2", t2.Refused, budget.Live())
	}
}

// TestKeyBudget_Concurrent: subtasks taking keys at once never exceed the
// limit together.
func TestKeyBudget_Concurrent(t *testing.T) {
	budget := NewKeyBudget(100)
	done := make(chan int)
	for w := 0; w < 4; w++ {
		go func() {
			n := 0
			for i := 0; i < 1000; i++ {
				if budget.take() {
					n++
				}
			}
			done <- n
		}()
	}
	total := 0
	for w := 0; w < 4; w++ {
		total += <-done
	}
	if total != 100 || budget.Live() != 100 {
		t.Fatalf("%d taken, live %d; want 100", total, budget.Live())
	}
}

// BenchmarkWindowTask_KeyLimit: the per-reading cost of max_keys, readings
// of 1,000 live keys into tumbling windows, with and without the limit.
func BenchmarkWindowTask_KeyLimit(b *testing.B) {
	for _, limited := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "max_keys"}[limited], func(b *testing.B) {
			var store window.Store = window.NewMemoryStore()
			keys := window.NewLiveKeys(store)
			if limited {
				store = keys
			}
			op, err := window.NewOperator(window.Spec{Assigner: window.Tumbling(1<<40, 0, true),
				Aggs: []window.AggSpec{{Func: aggregate.Count, Arg: -1}}}, store)
			if err != nil {
				b.Fatal(err)
			}
			task := NewWindowTask("p", "dev", []string{"n"}, op)
			if limited {
				task.LimitKeys(keys, NewKeyBudget(2000), false)
			}
			batch := stream.NewBatch(0)
			for i := range 512 {
				key := []byte(fmt.Sprintf("device-%04d", i*7%1000))
				batch.Append(key, state.KeyGroup(key, 128), int64(i), nil, nil, uint64(i))
			}
			task.Process(batch, false)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				task.Process(batch, false)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch.Len()), "ns/reading")
		})
	}
}
