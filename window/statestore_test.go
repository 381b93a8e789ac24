package window

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// checkpointChain keeps snapshot entries as a checkpoint would: a full base
// followed by increments.
type checkpointChain struct {
	entries []chainEntry
}

type chainEntry struct {
	bucket, key, value []byte
	deleted            bool
}

// take snapshots be after flushing store's cached windows into it, as the
// agent does at a barrier.
func (c *checkpointChain) take(t testing.TB, store *StateStore, be state.Backend, full bool) {
	t.Helper()
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	snap, err := be.Snapshot(full)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if !snap.Incremental() {
		c.entries = c.entries[:0]
	}
	err = snap.Entries(func(b, k, v []byte, del bool) error {
		c.entries = append(c.entries, chainEntry{bytes.Clone(b), bytes.Clone(k), bytes.Clone(v), del})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (c *checkpointChain) source() state.Entries {
	return func(fn func(b, k, v []byte, del bool) error) error {
		for _, e := range c.entries {
			if err := fn(e.bucket, e.key, e.value, e.del()); err != nil {
				return err
			}
		}
		return nil
	}
}

func (e chainEntry) del() bool { return e.deleted }

func openTestBolt(t testing.TB, cacheBytes int) *state.Bolt {
	t.Helper()
	be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{MaxSize: 64 << 20, CacheBytes: cacheBytes, FlushBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// Random specs and inputs give identical firings and counts on MemoryStore
// and on StateStore over bbolt (with a byte cache small enough to spill, and
// again with object caches so small that they are always full: keys are
// evicted, admitted and refused all the time) and over the memory backend, including across checkpoint, close
// and restore into a fresh backend (docs/architecture.md "State": spilled state gives
// unchanged results).
func TestStateStore_MatchesMemoryStore(t *testing.T) {
	seed := uint64(2024)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 5))
	iters := 150
	if testing.Short() {
		iters = 30
	}
	for iter := range iters {
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
			Aggs:            []AggSpec{{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Median, Arg: 0}, {Func: aggregate.Avg, Arg: 0}, {Func: aggregate.Last, Arg: 0}},
		}
		funcs := []aggregate.Func{aggregate.Count, aggregate.Median, aggregate.Avg, aggregate.Last}
		where := fmt.Sprintf("iter %d %v L=%d early=%d n=%d", iter, a, spec.AllowedLateness, spec.EarlyEvery, spec.TriggerCount)

		ref, err := NewOperator(spec, NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		type sut struct {
			name  string
			cache int // StateStoreOptions.CacheBytes
			tc    int // StateStoreOptions.TimerCache
			be    state.Backend
			store *StateStore
			op    *Operator
			chain checkpointChain
			out   Output
		}
		mk := func(name string, cache, tc int, be state.Backend) *sut {
			s := &sut{name: name, cache: cache, tc: tc, be: be}
			if s.store, err = NewStateStoreWith(be, "op", funcs, StateStoreOptions{CacheBytes: cache, TimerCache: tc}); err != nil {
				t.Fatal(err)
			}
			if s.op, err = NewOperator(spec, s.store); err != nil {
				t.Fatal(err)
			}
			return s
		}
		suts := []*sut{
			mk("bolt", 0, 0, openTestBolt(t, 2<<10)),
			// A front of 32k timers next to a tiny object cache (the
			// default front is half of CacheBytes).
			mk("bolt, evicting", 1, 32<<10, openTestBolt(t, 2<<10)),
			mk("bolt, 2 KiB objects", 2<<10, 32<<10, openTestBolt(t, 2<<10)),
			mk("bolt, timers spilling", 0, 1, openTestBolt(t, 2<<10)),
			mk("bolt, 3 front timers", 1, 3, openTestBolt(t, 2<<10)),
			mk("memory", 0, 0, state.NewMemory()),
		}
		var refOut Output
		now, wm, procSet, wmSet := int64(0), int64(-50), false, false
		nkeys := 1 + r.IntN(12)
		compare := func(step int) {
			t.Helper()
			for _, s := range suts {
				if err := s.store.Err(); err != nil {
					t.Fatalf("%s step %d %s: %v", where, step, s.name, err)
				}
				if !slices.EqualFunc(refOut.Firings, s.out.Firings, firingEqual) {
					t.Fatalf("%s step %d %s: firings\n%v\nwant\n%v", where, step, s.name, s.out.Firings, refOut.Firings)
				}
				rs, ss := ref.Stats(), s.op.Stats()
				if rs.OpenWindows != ss.OpenWindows || rs.PendingTimers != ss.PendingTimers {
					t.Fatalf("%s step %d %s: counts %d/%d, want %d/%d", where, step, s.name, ss.OpenWindows, ss.PendingTimers, rs.OpenWindows, rs.PendingTimers)
				}
				s.out.Reset()
			}
			refOut.Reset()
		}
		for step := range 300 {
			switch r.IntN(12) {
			case 0, 1:
				wm += int64(r.IntN(15))
				wmSet = true
				ref.AdvanceWatermark(wm, &refOut)
				for _, s := range suts {
					s.op.AdvanceWatermark(wm, &s.out)
				}
			case 2:
				now += int64(r.IntN(15))
				procSet = true
				ref.AdvanceProcessingTime(now, &refOut)
				for _, s := range suts {
					s.op.AdvanceProcessingTime(now, &s.out)
				}
			case 3:
				// A checkpoint: full or incremental.
				full := r.IntN(4) == 0
				for _, s := range suts {
					s.chain.take(t, s.store, s.be, full)
				}
			case 4:
				if r.IntN(3) != 0 {
					break
				}
				// Close and restore into a fresh backend, as after a restart.
				for i, s := range suts {
					s.chain.take(t, s.store, s.be, false)
					if err := s.be.Close(); err != nil {
						t.Fatal(err)
					}
					var be state.Backend = state.NewMemory()
					if s.name != "memory" {
						be = openTestBolt(t, 2<<10)
					}
					// Register before restoring, as the agent does.
					ns := mk(s.name, s.cache, s.tc, be)
					if err := be.Restore(s.chain.source(), state.RestoreOptions{}); err != nil {
						t.Fatal(err)
					}
					ns.chain = s.chain
					if wmSet { // also when it stayed at its start, -50
						ns.op.AdvanceWatermark(wm, &ns.out)
					}
					if procSet {
						ns.op.AdvanceProcessingTime(now, &ns.out)
					}
					if len(ns.out.Firings) != 0 {
						t.Fatalf("%s: restored operator fired %v", where, ns.out.Firings)
					}
					suts[i] = ns
				}
			default:
				ts := wm + int64(r.IntN(60)) - 20
				if !eventTime {
					ts = now + int64(r.IntN(5))
				}
				v := float64(r.IntN(100)) - 50
				if r.IntN(10) == 0 {
					v = math.NaN()
				}
				key := []byte(fmt.Sprintf("k%d", r.IntN(nkeys)))
				if r.IntN(8) == 0 {
					key = append(key, 0) // keys with zero bytes and prefixes of others
				}
				e := Element{Key: key, KeyGroup: state.KeyGroup(key, 8), Time: ts, Values: []float64{v}}
				want := ref.Process(&e, &refOut)
				for _, s := range suts {
					if got := s.op.Process(&e, &s.out); got != want {
						t.Fatalf("%s step %d %s: reading %q@%d: %v, want %v", where, step, s.name, key, ts, got, want)
					}
				}
			}
			compare(step)
		}
		ref.AdvanceWatermark(math.MaxInt64, &refOut)
		ref.AdvanceProcessingTime(math.MaxInt64, &refOut)
		for _, s := range suts {
			s.op.AdvanceWatermark(math.MaxInt64, &s.out)
			s.op.AdvanceProcessingTime(math.MaxInt64, &s.out)
		}
		compare(-1)
	}
}

func firingEqual(a, b Firing) bool {
	if a.Kind != b.Kind || a.Seq != b.Seq || a.Window != b.Window || a.KeyGroup != b.KeyGroup || !bytes.Equal(a.Key, b.Key) || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		x, y := a.Values[i], b.Values[i]
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return false
		}
	}
	return true
}

// A reading of a hot key with an open window costs no allocation through
// StateStore on bbolt (object cache hit: the accumulators fold in place).
func TestStateStore_SteadyStateAllocs(t *testing.T) {
	be := openTestBolt(t, 1<<20)
	funcs := []aggregate.Func{aggregate.Count, aggregate.Avg, aggregate.Max}
	store, err := NewStateStore(be, "op", funcs)
	if err != nil {
		t.Fatal(err)
	}
	op, err := NewOperator(Spec{Assigner: Tumbling(60_000, 0, true), Aggs: []AggSpec{{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Avg, Arg: 0}, {Func: aggregate.Max, Arg: 0}}}, store)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	e := Element{Values: []float64{1}}
	i := 0
	step := func() {
		e.Key = keys[i%len(keys)]
		e.KeyGroup = state.KeyGroup(e.Key, 128)
		e.Time = int64(i % 1000)
		i++
		op.Process(&e, &out)
	}
	for range 10 {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per reading", n)
	}
	if err := store.Err(); err != nil {
		t.Fatal(err)
	}
}

// Flush writes the cached windows that changed, and only those: windows
// opened and purged between two flushes never reach the backend, so the
// incremental snapshot after Flush holds exactly the live windows, and a
// restore from it fires them with their full contents.
func TestStateStore_FlushWritesOnlyLiveWindows(t *testing.T) {
	funcs := []aggregate.Func{aggregate.Count, aggregate.Sum}
	spec := Spec{Assigner: Tumbling(10, 0, true), Aggs: []AggSpec{{Func: aggregate.Count, Arg: -1}, {Func: aggregate.Sum, Arg: 0}}}
	be := openTestBolt(t, 1<<20)
	store, err := NewStateStore(be, "op", funcs)
	if err != nil {
		t.Fatal(err)
	}
	op, err := NewOperator(spec, store)
	if err != nil {
		t.Fatal(err)
	}
	var chain checkpointChain
	chain.take(t, store, be, true) // the base: empty
	var out Output
	keys := []string{"a", "b", "c"}
	feed := func(ts int64) {
		for _, k := range keys {
			e := Element{Key: []byte(k), KeyGroup: state.KeyGroup([]byte(k), 8), Time: ts, Values: []float64{float64(ts)}}
			op.Process(&e, &out)
		}
	}
	feed(1)
	feed(2)
	op.AdvanceWatermark(9, &out) // [0, 10) fires and is purged
	if len(out.Firings) != len(keys) {
		t.Fatalf("%d firings of [0, 10), want %d", len(out.Firings), len(keys))
	}
	feed(11)
	feed(12)
	base := len(chain.entries)
	chain.take(t, store, be, false) // flushes
	if len(chain.entries) < base {
		t.Fatal("the second snapshot was not incremental")
	}
	var windows int
	for _, e := range chain.entries[base:] {
		if string(e.bucket) != "op/windows" {
			continue
		}
		if e.deleted {
			t.Errorf("deletion of %x: the purged windows should never have reached the backend", e.key)
		}
		windows++
	}
	if windows != len(keys) {
		t.Fatalf("incremental snapshot with %d window entries, want %d", windows, len(keys))
	}

	be2 := openTestBolt(t, 1<<20)
	store2, err := NewStateStore(be2, "op", funcs)
	if err != nil {
		t.Fatal(err)
	}
	if err := be2.Restore(chain.source(), state.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	op2, err := NewOperator(spec, store2)
	if err != nil {
		t.Fatal(err)
	}
	if s := op2.Stats(); s.OpenWindows != len(keys) {
		t.Fatalf("restored %d windows, want %d", s.OpenWindows, len(keys))
	}
	out.Reset()
	op2.AdvanceWatermark(math.MaxInt64, &out)
	for _, f := range out.Firings {
		if f.Window != (Window{10, 20}) || f.Values[0] != 2 || f.Values[1] != 23 {
			t.Errorf("restored firing %s %v %v", f.Key, f.Window, f.Values)
		}
	}
	if len(out.Firings) != len(keys) || store2.Err() != nil {
		t.Fatalf("%d firings after restore, want %d (err %v)", len(out.Firings), len(keys), store2.Err())
	}
}

// Timers through the Store interface alone, with what the operator never
// does but the contract allows: adding a timer twice, adding one below the
// time being popped, popping with a bound that goes down, deleting absent
// ones. StateStore (its in-memory front merged with the backend, with
// flushes, spills and restores in between) pops exactly what MemoryStore
// pops, in the same order.
func TestStateStore_TimersMatchMemoryStore(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 3))
	funcs := []aggregate.Func{aggregate.Count}
	for iter := range 40 {
		ref := NewMemoryStore()
		type sut struct {
			name  string
			tc    int
			be    state.Backend
			store *StateStore
			chain checkpointChain
		}
		mk := func(name string, tc int, be state.Backend) *sut {
			st, err := NewStateStoreWith(be, "op", funcs, StateStoreOptions{TimerCache: tc})
			if err != nil {
				t.Fatal(err)
			}
			return &sut{name: name, tc: tc, be: be, store: st}
		}
		suts := []*sut{
			mk("front", 0, openTestBolt(t, 2<<10)),
			mk("front of 1", 1, openTestBolt(t, 2<<10)),
			mk("front of 5", 5, state.NewMemory()),
		}
		keys := [][]byte{[]byte("a"), []byte("a\x00"), []byte("ab"), []byte("b"), {0}, []byte("device-17")}
		for step := range 400 {
			key := keys[r.IntN(len(keys))]
			kg := state.KeyGroup(key, 8)
			d := Domain(r.IntN(2)) + EventTime
			tm := int64(r.IntN(40))
			w := Window{Start: int64(r.IntN(3)), End: int64(3 + r.IntN(3))}
			where := fmt.Sprintf("iter %d step %d", iter, step)
			// each applies a keyed timer change to every store.
			each := func(change func(st Store)) {
				ref.SetCurrentKey(kg, key)
				change(ref)
				for _, s := range suts {
					s.store.SetCurrentKey(kg, key)
					change(s.store)
				}
			}
			switch op := r.IntN(10); {
			case op < 4:
				each(func(st Store) { st.AddTimer(d, tm, w) })
			case op < 6:
				each(func(st Store) { st.DeleteTimer(d, tm, w) })
			case op < 9:
				upTo := int64(r.IntN(45))
				for range 1 + r.IntN(4) {
					want, wok := ref.PopTimer(d, upTo)
					want.Key = bytes.Clone(want.Key)
					for _, s := range suts {
						got, ok := s.store.PopTimer(d, upTo)
						if ok != wok || ok && (got.Time != want.Time || got.KeyGroup != want.KeyGroup || !bytes.Equal(got.Key, want.Key) || got.Window != want.Window) {
							t.Fatalf("%s %s: PopTimer(%v, %d) = %+v %v, want %+v %v", where, s.name, d, upTo, got, ok, want, wok)
						}
					}
				}
			default:
				for i, s := range suts {
					s.chain.take(t, s.store, s.be, r.IntN(3) == 0)
					if r.IntN(2) == 0 {
						continue
					}
					// Restore into a fresh backend, as after a restart.
					var be state.Backend = state.NewMemory()
					if _, isBolt := s.be.(*state.Bolt); isBolt {
						be = openTestBolt(t, 2<<10)
					}
					ns := mk(s.name, s.tc, be)
					if err := be.Restore(s.chain.source(), state.RestoreOptions{}); err != nil {
						t.Fatal(err)
					}
					ns.chain = s.chain
					if err := s.be.Close(); err != nil {
						t.Fatal(err)
					}
					suts[i] = ns
				}
			}
			_, want := ref.Counts()
			for _, s := range suts {
				if err := s.store.Err(); err != nil {
					t.Fatalf("%s %s: %v", where, s.name, err)
				}
				if _, got := s.store.Counts(); got != want {
					t.Fatalf("%s %s: %d timers, want %d", where, s.name, got, want)
				}
			}
		}
	}
}
