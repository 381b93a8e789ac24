package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TimerQueue pops exactly what a naive sorted set pops, with adds and
// deletes interleaved (also of keys inside the read-ahead), on both
// backends, across a Restore.
func TestTimerQueue_MatchesModel(t *testing.T) {
	seed := uint64(9)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for _, newBE := range []func() Backend{
		func() Backend { return NewMemory() },
		func() Backend { return openTestBolt(t, BoltOptions{CacheBytes: 2 << 10, FlushBatch: 5}) },
	} {
		be := newBE()
		b, _ := be.Bucket("timers", nil)
		// Keys of another prefix in the same bucket must be invisible.
		be.Put(b, []byte("\x02zzz"), nil)
		q, err := NewTimerQueue(be, b, []byte{1})
		if err != nil {
			t.Fatal(err)
		}
		model := map[string]bool{}
		key := func() []byte {
			return AppendOrderedTime([]byte{1}, int64(r.IntN(2000)-1000))
		}
		for step := range 20000 {
			switch op := r.IntN(10); {
			case op < 5:
				k := fmt.Appendf(key(), "k%d", r.IntN(50))
				added, err := q.Add(k)
				if err != nil || added == model[string(k)] {
					t.Fatalf("step %d: Add(%q) = %v, %v", step, k, added, err)
				}
				model[string(k)] = true
			case op < 7:
				k := fmt.Appendf(key(), "k%d", r.IntN(50))
				deleted, err := q.Delete(k)
				if err != nil || deleted != model[string(k)] {
					t.Fatalf("step %d: Delete(%q) = %v, %v", step, k, deleted, err)
				}
				delete(model, string(k))
			case op < 9:
				below := key()
				var want []byte
				for k := range model {
					if bytes.Compare([]byte(k), below) < 0 && (want == nil || bytes.Compare([]byte(k), want) < 0) {
						want = []byte(k)
					}
				}
				got, ok, err := q.Pop(below)
				if err != nil || ok != (want != nil) || !bytes.Equal(got, want) {
					t.Fatalf("step %d: Pop(%q) = %q %v %v, want %q", step, below, got, ok, err, want)
				}
				delete(model, string(want))
			default:
				if r.IntN(20) == 0 {
					var c chain
					c.take(t, be, true).Close()
					if err := be.Restore(c.source(), RestoreOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if q.Len() != len(model) {
				t.Fatalf("step %d: Len %d, want %d", step, q.Len(), len(model))
			}
		}
		var rest []string
		for {
			k, ok, err := q.Pop(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			rest = append(rest, string(k))
		}
		want := make([]string, 0, len(model))
		for k := range model {
			want = append(want, k)
		}
		slices.Sort(want)
		if !slices.Equal(rest, want) {
			t.Fatalf("drain: %d keys, want %d", len(rest), len(want))
		}
	}
}

func TestAppendOrderedTime_Order(t *testing.T) {
	times := []int64{-1 << 63, -1000, -1, 0, 1, 1000, 1<<63 - 1}
	for i := 1; i < len(times); i++ {
		a, b := AppendOrderedTime(nil, times[i-1]), AppendOrderedTime(nil, times[i])
		if bytes.Compare(a, b) >= 0 {
			t.Fatalf("%d does not sort before %d", times[i-1], times[i])
		}
		if got, _ := OrderedTime(b); got != times[i] {
			t.Fatalf("round trip %d → %d", times[i], got)
		}
	}
}
