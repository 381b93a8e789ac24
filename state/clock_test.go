package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// clockOp is one step of a table-driven Clock test.
type clockOp struct {
	op   string // admit, lookup, use, step, drop, dirty, clean, flush, recharge, shared, reset
	key  string // admit, lookup
	slot int32  // use, step's skip, drop, dirty, clean, recharge
	n    int    // admit, recharge, shared: the caller's charge

	want     int32   // admit, lookup, step: the slot (step: -1 for none)
	wantOK   bool    // step: a victim; clean: the mark was there
	wantKeys []int32 // flush: the slots written, in order
}

// TestClock runs each case's operations in turn on a fresh Clock and
// checks each result and, after each, that Bytes is the sum of its parts.
func TestClock(t *testing.T) {
	long := "a-key-longer-than-the-inline-bytes-of-a-slot"
	cases := []struct {
		name string
		ops  []clockOp
	}{
		{"admit and lookup", []clockOp{
			{op: "lookup", key: "a", want: -1},
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: "b", want: 1},
			{op: "admit", key: long, want: 2},
			{op: "lookup", key: "a", want: 0},
			{op: "lookup", key: long, want: 2},
			{op: "lookup", key: long[:len(long)-1], want: -1},
			{op: "lookup", key: "", want: -1},
			{op: "admit", key: "", want: 3},
			{op: "lookup", key: "", want: 3},
		}},
		{"a dropped slot is reused, last dropped first", []clockOp{
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: "b", want: 1},
			{op: "admit", key: "c", want: 2},
			{op: "drop", slot: 0},
			{op: "drop", slot: 2},
			{op: "lookup", key: "a", want: -1},
			{op: "lookup", key: "c", want: -1},
			{op: "admit", key: "d", want: 2},
			{op: "admit", key: "e", want: 0},
			{op: "admit", key: "f", want: 3},
			{op: "lookup", key: "b", want: 1},
		}},
		{"second chance: the hand clears reference bits, then evicts in slot order", []clockOp{
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: "b", want: 1},
			{op: "admit", key: "c", want: 2},
			{op: "step", slot: -1, want: -1}, // clears a
			{op: "step", slot: -1, want: -1}, // clears b
			{op: "step", slot: -1, want: -1}, // clears c
			{op: "step", slot: -1, want: 0, wantOK: true},
			{op: "step", slot: -1, want: 1, wantOK: true},
		}},
		{"a use between turns saves a key", []clockOp{
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: "b", want: 1},
			{op: "step", slot: -1, want: -1},
			{op: "step", slot: -1, want: -1},
			{op: "lookup", key: "a", want: 0}, // a hit is a use
			{op: "step", slot: -1, want: -1},  // clears a again
			{op: "step", slot: -1, want: 1, wantOK: true},
			{op: "use", slot: 1},
			{op: "step", slot: -1, want: 0, wantOK: true}, // a was not used since
			{op: "drop", slot: 0},
			{op: "step", slot: -1, want: -1}, // clears b
			{op: "step", slot: -1, want: 1, wantOK: true},
		}},
		{"step passes over skip and free slots", []clockOp{
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: "b", want: 1},
			{op: "admit", key: "c", want: 2},
			{op: "drop", slot: 1},
			{op: "step", slot: 0, want: -1}, // clears c
			{op: "step", slot: 0, want: 2, wantOK: true},
			{op: "drop", slot: 2},
			{op: "step", slot: 0, want: -1}, // only skip is resident
			{op: "step", slot: -1, want: -1},
			{op: "step", slot: -1, want: 0, wantOK: true},
		}},
		{"an empty clock has no victim", []clockOp{
			{op: "step", slot: -1, want: -1},
		}},
		{"step may return a dirty slot; drop forgets its mark", []clockOp{
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: "b", want: 1},
			{op: "dirty", slot: 0},
			{op: "dirty", slot: 1},
			{op: "step", slot: -1, want: -1},
			{op: "step", slot: -1, want: -1},
			{op: "step", slot: -1, want: 0, wantOK: true},
			{op: "drop", slot: 0},
			{op: "admit", key: "c", want: 0}, // not dirty: the mark went with a
			{op: "flush", wantKeys: []int32{1}},
		}},
		{"flush writes in first-mark order, once each", []clockOp{
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: "b", want: 1},
			{op: "admit", key: "c", want: 2},
			{op: "dirty", slot: 2},
			{op: "dirty", slot: 0},
			{op: "dirty", slot: 2},
			{op: "dirty", slot: 1},
			{op: "clean", slot: 1, wantOK: true},
			{op: "clean", slot: 1},
			{op: "flush", wantKeys: []int32{2, 0}},
			{op: "flush", wantKeys: nil},
			{op: "dirty", slot: 1},
			{op: "flush", wantKeys: []int32{1}},
			{op: "lookup", key: "b", want: 1}, // still resident
		}},
		{"reset forgets keys and marks", []clockOp{
			{op: "admit", key: "a", want: 0},
			{op: "admit", key: long, want: 1},
			{op: "dirty", slot: 1},
			{op: "shared", n: 50},
			{op: "reset"},
			{op: "lookup", key: "a", want: -1},
			{op: "lookup", key: long, want: -1},
			{op: "flush", wantKeys: nil},
			{op: "step", slot: -1, want: -1},
			{op: "admit", key: "b", want: 1}, // the last slot dropped
			{op: "flush", wantKeys: nil},
		}},
		{"charges: recharge, long keys, shared", []clockOp{
			{op: "admit", key: "a", n: 100, want: 0},
			{op: "admit", key: long, n: 7, want: 1},
			{op: "recharge", slot: 0, n: 3},
			{op: "shared", n: 40},
			{op: "drop", slot: 1},
			{op: "shared", n: -40},
			{op: "drop", slot: 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClock[int](1 << 20)
			charged := map[int32]int{} // the caller's charge by resident slot
			shared := 0
			for i, o := range tc.ops {
				where := fmt.Sprintf("op %d (%s %q %d)", i, o.op, o.key, o.slot)
				switch o.op {
				case "admit":
					if got := c.Lookup(c.Hash([]byte(o.key)), []byte(o.key)); got >= 0 {
						t.Fatalf("%s: already resident in %d", where, got)
					}
					got := c.Admit(c.Hash([]byte(o.key)), []byte(o.key), o.n)
					if got != o.want {
						t.Fatalf("%s: slot %d, want %d", where, got, o.want)
					}
					if string(c.Key(got)) != o.key {
						t.Fatalf("%s: Key %q", where, c.Key(got))
					}
					if c.Dirty(got) {
						t.Fatalf("%s: a new key is dirty", where)
					}
					charged[got] = c.Cost(len(o.key), o.n)
				case "lookup":
					if got := c.Lookup(c.Hash([]byte(o.key)), []byte(o.key)); got != o.want {
						t.Fatalf("%s: slot %d, want %d", where, got, o.want)
					}
				case "use":
					c.Use(o.slot)
				case "step":
					got, ok := c.Step(o.slot)
					if ok != o.wantOK || ok && got != o.want {
						t.Fatalf("%s: %d %v, want %d %v", where, got, ok, o.want, o.wantOK)
					}
				case "drop":
					c.Drop(o.slot)
					delete(charged, o.slot)
				case "dirty":
					c.MarkDirty(o.slot)
					if !c.Dirty(o.slot) {
						t.Fatalf("%s: not dirty", where)
					}
				case "clean":
					if got := c.Clean(o.slot); got != o.wantOK {
						t.Fatalf("%s: %v, want %v", where, got, o.wantOK)
					}
				case "flush":
					var got []int32
					if err := c.Flush(func(s int32) error {
						if c.Dirty(s) {
							t.Errorf("%s: slot %d still marked while written", where, s)
						}
						got = append(got, s)
						return nil
					}); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, o.wantKeys) {
						t.Fatalf("%s: wrote %v, want %v", where, got, o.wantKeys)
					}
				case "recharge":
					c.Recharge(o.slot, o.n)
					charged[o.slot] = c.Cost(len(c.Key(o.slot)), o.n)
				case "shared":
					c.AddShared(o.n)
					shared += o.n
				case "reset":
					c.Reset()
					clear(charged)
				default:
					t.Fatalf("unknown op %q", o.op)
				}
				want := shared
				for _, n := range charged {
					want += n
				}
				if c.Bytes() != want {
					t.Fatalf("%s: Bytes %d, want %d", where, c.Bytes(), want)
				}
				if c.Len() != len(charged) {
					t.Fatalf("%s: Len %d, want %d", where, c.Len(), len(charged))
				}
			}
		})
	}
}

// TestClock_Cost: a key longer than a slot holds inline is charged its
// bytes; a short one only the slot.
func TestClock_Cost(t *testing.T) {
	c := NewClock[[4]int64](0)
	if got, want := c.Cost(clockInlineKey, 10), c.SlotBytes()+10; got != want {
		t.Errorf("inline key: %d, want %d", got, want)
	}
	if got, want := c.Cost(clockInlineKey+1, 10), c.SlotBytes()+10+clockInlineKey+1; got != want {
		t.Errorf("long key: %d, want %d", got, want)
	}
	if c.SlotBytes() < 32+16 {
		t.Errorf("SlotBytes %d leaves out the value", c.SlotBytes())
	}
}

// TestClock_Budget: Over compares Bytes with the budget; SetBudget moves it
// and evicts nothing.
func TestClock_Budget(t *testing.T) {
	c := NewClock[int](0)
	if c.Over() {
		t.Fatal("an empty clock with no budget is over it")
	}
	s := c.Admit(c.Hash([]byte("k")), []byte("k"), 0)
	if !c.Over() {
		t.Fatal("a key over a budget of 0 is not over it")
	}
	c.SetBudget(c.Bytes())
	if c.Over() || c.Budget() != c.Bytes() {
		t.Fatalf("budget %d, bytes %d: over", c.Budget(), c.Bytes())
	}
	c.AddSlotBytes(s, 1)
	if !c.Over() {
		t.Fatal("one byte more is not over")
	}
	if c.Len() != 1 {
		t.Fatal("SetBudget evicted")
	}
}

// TestClock_FlushStopsAtError: the slots after a failed write keep their
// marks for the next Flush; the failed one does not.
func TestClock_FlushStopsAtError(t *testing.T) {
	c := NewClock[int](1 << 20)
	for i := range 4 {
		s := c.Admit(c.Hash([]byte{byte(i)}), []byte{byte(i)}, 0)
		c.MarkDirty(s)
	}
	boom := errors.New("boom")
	var got []int32
	err := c.Flush(func(s int32) error {
		got = append(got, s)
		if s == 1 {
			return boom
		}
		return nil
	})
	if err != boom || !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("wrote %v, %v; want [0 1], boom", got, err)
	}
	got = got[:0]
	if err := c.Flush(func(s int32) error { got = append(got, s); return nil }); err != nil || !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("then wrote %v, %v; want [2 3]", got, err)
	}
}

// TestClock_ValueStaysForTheNextKey: Drop leaves the value for the slot's
// next key, so its buffers are reused.
func TestClock_ValueStaysForTheNextKey(t *testing.T) {
	c := NewClock[[]byte](1 << 20)
	s := c.Admit(c.Hash([]byte("a")), []byte("a"), 0)
	*c.Val(s) = make([]byte, 0, 64)
	c.Drop(s)
	s = c.Admit(c.Hash([]byte("b")), []byte("b"), 0)
	if cap(*c.Val(s)) != 64 {
		t.Fatalf("the next key's value has cap %d, want the buffer of 64", cap(*c.Val(s)))
	}
}

// TestClock_MatchesMap admits and drops random keys, short and long, and
// checks every key's lookup against a map after each step: removals shift
// index words back without breaking another key's probe sequence, growth
// keeps them all, and a reused slot's long-key buffer holds its new key.
func TestClock_MatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := NewClock[struct{}](1 << 30)
	model := map[string]int32{}
	keyOf := func(i int) string {
		if i%7 == 0 {
			return fmt.Sprintf("a-long-key-beyond-the-inline-bytes-%d", i)
		}
		return fmt.Sprintf("k%d", i)
	}
	for step := range 20000 {
		k := keyOf(rng.IntN(600))
		if slot, ok := model[k]; ok {
			c.Drop(slot)
			delete(model, k)
		} else {
			model[k] = c.Admit(c.Hash([]byte(k)), []byte(k), 0)
		}
		if step%97 != 0 {
			continue
		}
		for i := range 600 {
			k := keyOf(i)
			want, ok := model[k]
			if !ok {
				want = -1
			}
			if got := c.find(c.Hash([]byte(k)), []byte(k)); got != want {
				t.Fatalf("step %d: key %s in slot %d, want %d", step, k, got, want)
			}
			if ok && string(c.Key(want)) != k {
				t.Fatalf("step %d: slot %d holds %q, want %q", step, want, c.Key(want), k)
			}
		}
		if c.Len() != len(model) {
			t.Fatalf("step %d: %d resident, want %d", step, c.Len(), len(model))
		}
	}
}

// TestClock_NoAllocs: once grown, a lookup, a use, marking, eviction and
// re-admission of keys long and short allocate nothing.
func TestClock_NoAllocs(t *testing.T) {
	c := NewClock[int](1 << 20)
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = []byte("sensor-" + strconv.Itoa(i))
		if i%2 == 0 {
			keys[i] = append(keys[i], "-with-a-suffix-beyond-the-inline-bytes"...)
		}
		c.Admit(c.Hash(keys[i]), keys[i], 0)
	}
	write := func(int32) error { return nil }
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		k := keys[i%len(keys)]
		i++
		h := c.Hash(k)
		s := c.Lookup(h, k)
		if s < 0 {
			v, ok := c.Step(-1)
			for !ok {
				v, ok = c.Step(-1)
			}
			c.Drop(v)
			s = c.Admit(h, k, 0)
		}
		c.MarkDirty(s)
		if i%16 == 0 {
			v, ok := c.Step(s)
			if ok {
				c.Drop(v)
			}
			_ = c.Flush(write)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per operation", allocs)
	}
}

// BenchmarkClock_Get measures a reading's cache work on a key: a hit on a
// resident key (hash, lookup, mark dirty) for 10,000 keys, all resident;
// with "churn", twice as many keys as fit, so a miss steps the hand and
// re-admits (a key evicted every other reading).
func BenchmarkClock_Get(b *testing.B) {
	for _, bc := range []struct {
		name  string
		keys  int
		churn bool
	}{{"hit/keys=10000", 10_000, false}, {"churn/keys=10000", 10_000, true}} {
		b.Run(bc.name, func(b *testing.B) {
			keys := make([][]byte, bc.keys)
			for i := range keys {
				keys[i] = []byte("device-" + strconv.Itoa(i))
			}
			c := NewClock[[2]int64](1 << 30)
			if bc.churn {
				c.SetBudget(bc.keys / 2 * c.Cost(0, 0))
			}
			get := func(k []byte) {
				h := c.Hash(k)
				s := c.Lookup(h, k)
				if s < 0 {
					for c.Bytes()+c.Cost(len(k), 0) > c.Budget() {
						if v, ok := c.Step(-1); ok {
							c.Drop(v)
						}
					}
					s = c.Admit(h, k, 0)
				}
				c.Val(s)[0]++
				c.MarkDirty(s)
			}
			for _, k := range keys {
				get(k)
			}
			b.ReportAllocs()
			cpu0 := clockCPU()
			i := 0
			for b.Loop() {
				get(keys[i])
				if i++; i == len(keys) {
					i = 0
					_ = c.Flush(func(int32) error { return nil })
				}
			}
			// CPU time, not wall time: on a shared machine the wall clock
			// also counts time the benchmark spent descheduled.
			b.ReportMetric(float64(clockCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// clockCPU returns the user+system CPU time of the process.
func clockCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
