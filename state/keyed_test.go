package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

const testMaxKeyGroups = 128

// avgFunc is an AggregateFunc of an average: the accumulator is (sum, n).
var avgFunc = AggregateFuncs[int64, Pair[int64, int64], float64]{
	CreateFunc: func() Pair[int64, int64] { return Pair[int64, int64]{} },
	AddFunc: func(a Pair[int64, int64], in int64) Pair[int64, int64] {
		return Pair[int64, int64]{First: a.First + in, Second: a.Second + 1}
	},
	MergeFunc: func(a, b Pair[int64, int64]) Pair[int64, int64] {
		return Pair[int64, int64]{First: a.First + b.First, Second: a.Second + b.Second}
	},
	ResultFunc: func(a Pair[int64, int64]) float64 { return float64(a.First) / float64(a.Second) },
}

var avgCodec = PairCodec[int64, int64]{First: VarintCodec{}, Second: VarintCodec{}}

func sum(a, b int64) int64 { return a + b }

// fakeClock is the TTL clock of the tests, in ms.
type fakeClock struct{ ms int64 }

func (c *fakeClock) now() int64 { return c.ms }

// testStates are one operator's typed states, with and without TTL, over a
// backend.
type testStates struct {
	be  Backend
	kc  *KeyedContext
	val *ValueState[int64]
	vtt *ValueState[string] // TTL, OnReadAndWrite, NeverReturnExpired
	lst *ListState[int64]
	ltt *ListState[string] // TTL, OnCreateAndWrite, NeverReturnExpired
	mp  *MapState[string, int64]
	mtt *MapState[int64, float64] // TTL, OnCreateAndWrite, ReturnExpiredIfNotCleanedUp
	red *ReducingState[int64]
	rtt *ReducingState[uint64] // TTL, OnReadAndWrite, ReturnExpiredIfNotCleanedUp
	agg *AggregatingState[int64, Pair[int64, int64], float64]
}

func newTestStates(t testing.TB, be Backend, clock *fakeClock) *testStates {
	t.Helper()
	kc, err := NewKeyedContext(be, "op", KeyedOptions{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	ttl := func(u TTLUpdate, v TTLVisibility) TTLConfig {
		return TTLConfig{TTL: 50 * time.Millisecond, Update: u, Visibility: v}
	}
	s := &testStates{be: be, kc: kc}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	s.val, err = NewValueState(kc, "val", Int64Codec{}, TTLConfig{})
	must(err)
	s.vtt, err = NewValueState(kc, "vtt", StringCodec{}, ttl(OnReadAndWrite, NeverReturnExpired))
	must(err)
	s.lst, err = NewListState(kc, "lst", VarintCodec{}, TTLConfig{})
	must(err)
	s.ltt, err = NewListState(kc, "ltt", StringCodec{}, ttl(OnCreateAndWrite, NeverReturnExpired))
	must(err)
	s.mp, err = NewMapState(kc, "mp", StringCodec{}, Int64Codec{}, TTLConfig{})
	must(err)
	s.mtt, err = NewMapState(kc, "mtt", Int64Codec{}, Float64Codec{}, ttl(OnCreateAndWrite, ReturnExpiredIfNotCleanedUp))
	must(err)
	s.red, err = NewReducingState(kc, "red", Int64Codec{}, sum, TTLConfig{})
	must(err)
	s.rtt, err = NewReducingState(kc, "rtt", UvarintCodec{}, func(a, b uint64) uint64 { return max(a, b) }, ttl(OnReadAndWrite, ReturnExpiredIfNotCleanedUp))
	must(err)
	s.agg, err = NewAggregatingState(kc, "agg", Codec[Pair[int64, int64]](avgCodec), AggregateFunc[int64, Pair[int64, int64], float64](avgFunc), TTLConfig{})
	must(err)
	return s
}

func (s *testStates) setKey(key string, ns int) {
	s.kc.SetCurrentKey(KeyGroup([]byte(key), testMaxKeyGroups), []byte(key))
	s.kc.SetNamespace(nsBytes(ns))
}

func nsBytes(ns int) []byte {
	if ns == 0 {
		return nil // the default namespace
	}
	return []byte{'w', byte(ns)}
}

// op applies random operation code c (with argument r) to the current key
// and namespace and describes the result.
func (s *testStates) op(c int, r *rand.Rand) string {
	res := func(v any, ok bool, err error) string { return fmt.Sprintf("%v %v %v", v, ok, err) }
	switch c {
	case 0:
		return fmt.Sprint(s.val.Update(r.Int64N(1000) - 500))
	case 1:
		v, ok, err := s.val.Value()
		return res(v, ok, err)
	case 2:
		return fmt.Sprint(s.val.Clear())
	case 3:
		return fmt.Sprint(s.vtt.Update(strings.Repeat("x", r.IntN(40))))
	case 4:
		v, ok, err := s.vtt.Value()
		return res(v, ok, err)
	case 5:
		return fmt.Sprint(s.lst.Add(r.Int64N(100)))
	case 6:
		l, err := s.lst.Get(nil)
		return fmt.Sprint(l, err)
	case 7:
		return fmt.Sprint(s.lst.Update([]int64{r.Int64N(9), r.Int64N(9)}[:r.IntN(3)]))
	case 8:
		return fmt.Sprint(s.ltt.Add(fmt.Sprint("e", r.IntN(100))))
	case 9:
		l, err := s.ltt.Get(nil)
		return fmt.Sprint(l, err)
	case 10:
		return fmt.Sprint(s.mp.Put(fmt.Sprint("k", r.IntN(8)), r.Int64N(100)))
	case 11:
		v, ok, err := s.mp.Get(fmt.Sprint("k", r.IntN(8)))
		return res(v, ok, err)
	case 12:
		return fmt.Sprint(s.mp.Remove(fmt.Sprint("k", r.IntN(8))))
	case 13:
		var out []string
		err := s.mp.Range(func(k string, v int64) bool { out = append(out, fmt.Sprint(k, "=", v)); return true })
		return fmt.Sprint(out, err)
	case 14:
		return fmt.Sprint(s.mtt.Put(r.Int64N(6)-3, r.Float64()))
	case 15:
		var out []string
		err := s.mtt.Range(func(k int64, v float64) bool { out = append(out, fmt.Sprint(k, "=", v)); return true })
		return fmt.Sprint(out, err)
	case 16:
		ok, err := s.mtt.Contains(r.Int64N(6) - 3)
		return res(nil, ok, err)
	case 17:
		return fmt.Sprint(s.red.Add(r.Int64N(10)))
	case 18:
		v, ok, err := s.red.Get()
		return res(v, ok, err)
	case 19:
		return fmt.Sprint(s.rtt.Add(r.Uint64N(100)))
	case 20:
		v, ok, err := s.rtt.Get()
		return res(v, ok, err)
	case 21:
		return fmt.Sprint(s.agg.Add(r.Int64N(10)))
	case 22:
		v, ok, err := s.agg.Get()
		return res(v, ok, err)
	case 23:
		e, err := s.mp.IsEmpty()
		return res(nil, e, err)
	case 24:
		return fmt.Sprint(s.mp.Clear())
	case 25:
		target, a, b := nsBytes(r.IntN(3)), nsBytes(r.IntN(3)), nsBytes(r.IntN(3))
		return fmt.Sprint(s.lst.MergeNamespaces(target, a, b), s.red.MergeNamespaces(target, a, b), s.agg.MergeNamespaces(target, a, b), s.ltt.MergeNamespaces(target, a))
	case 26:
		return fmt.Sprint(s.red.Clear(), s.agg.Clear(), s.ltt.Clear(), s.vtt.Clear())
	default:
		panic(c)
	}
}

const testOps = 27

// testKey is the i-th key of the property test.
func testKey(i int) string { return fmt.Sprint("sensor-", i) }

const testKeys = 40

// readAll describes every state of every key and namespace, without
// changing anything a later read could see differently (reads may restamp,
// identically on every backend).
func (s *testStates) readAll() string {
	var b strings.Builder
	for i := range testKeys {
		for ns := range 3 {
			s.setKey(testKey(i), ns)
			for _, c := range []int{1, 4, 6, 9, 13, 15, 18, 20, 22} {
				b.WriteString(s.op(c, nil))
				b.WriteByte(';')
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Random operation sequences on every typed state (with and without TTL,
// on a fake clock, with background cleanup) give identical results on
// Memory and on Bolt with a tiny cache, including across Snapshot → Restore
// (full and incremental chains, filtered for expired values) into fresh
// backends and a key-group-filtered restore.
func TestKeyed_MemoryMatchesBolt(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			clock := &fakeClock{ms: 1_700_000_000_000}
			mem := newTestStates(t, NewMemory(), clock)
			bolt := newTestStates(t, openTestBolt(t, BoltOptions{CacheBytes: 4 << 10, FlushBatch: 7}), clock)
			insts := []*testStates{mem, bolt}
			var chains [2]chain
			for step := range 4000 {
				key, ns := testKey(r.IntN(testKeys)), r.IntN(3)
				c := r.IntN(testOps + 4)
				seed2 := r.Uint64()
				var outs []string
				for i, in := range insts {
					var out string
					switch c {
					case testOps: // time passes
						if i == 0 {
							clock.ms += r.Int64N(30)
						}
					case testOps + 1:
						n, err := in.kc.Cleanup(1 + int(seed2%20))
						out = fmt.Sprint(n, err)
					case testOps + 2:
						snap, err := in.be.Snapshot(seed2%5 == 0)
						if err != nil {
							t.Fatal(err)
						}
						chains[i].take(t, filteredBackend{in.be, in.kc.FilterSnapshot(snap)}, false)
						out = fmt.Sprint(snap.Incremental())
					case testOps + 3:
						if step%8 != 0 {
							continue
						}
						// Restore the chain into a fresh backend of the same kind.
						var be Backend = NewMemory()
						if i == 1 {
							be = openTestBolt(t, BoltOptions{CacheBytes: 4 << 10, FlushBatch: 7})
						}
						fresh := newTestStates(t, be, clock)
						if err := be.Restore(chains[i].source(), RestoreOptions{}); err != nil {
							t.Fatal(err)
						}
						insts[i] = fresh
						in = fresh
						out = "restored"
					default:
						in.setKey(key, ns)
						out = in.op(c, rand.New(rand.NewPCG(seed2, 1)))
					}
					outs = append(outs, out)
				}
				if len(outs) == 2 && outs[0] != outs[1] {
					t.Fatalf("step %d op %d key %s ns %d: memory %q, bolt %q", step, c, key, ns, outs[0], outs[1])
				}
			}
			if a, b := insts[0].readAll(), insts[1].readAll(); a != b {
				t.Fatalf("final state differs:\nmemory %s\nbolt %s", a, b)
			}
			checkFilteredRestore(t, insts[1], clock)
		})
	}
}

// filteredBackend makes chain.take record a FilterSnapshot result.
type filteredBackend struct {
	Backend
	snap Snapshot
}

func (f filteredBackend) Snapshot(bool) (Snapshot, error) { return f.snap, nil }

// checkFilteredRestore restores a full snapshot of in into backends that
// keep one key-group range each (parallelism 3): every key reads the same
// in the subtask owning its key group and nothing elsewhere.
func checkFilteredRestore(t *testing.T, in *testStates, clock *fakeClock) {
	t.Helper()
	var full chain
	full.take(t, in.be, true).Close()
	// The reads of readAll may restamp (OnReadAndWrite) the values: read once
	// for that effect, then take the snapshot, so the comparison sees the
	// same stamps (the clock does not move between the two reads).
	in.readAll()
	full.take(t, in.be, true).Close()
	want := in.readAll()
	const parallelism = 3
	var subs []*testStates
	for i := range parallelism {
		kgs, _ := SubtaskKeyGroups(i, parallelism, testMaxKeyGroups)
		var be Backend = NewMemory()
		if i%2 == 1 {
			be = openTestBolt(t, BoltOptions{CacheBytes: 4 << 10})
		}
		sub := newTestStates(t, be, clock)
		if err := be.Restore(full.source(), RestoreOptions{KeyGroups: &kgs}); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	// Reassemble readAll from the owning subtasks.
	var got strings.Builder
	for i := range testKeys {
		kg := KeyGroup([]byte(testKey(i)), testMaxKeyGroups)
		owner := Subtask(kg, parallelism, testMaxKeyGroups)
		for p, sub := range subs {
			for ns := range 3 {
				sub.setKey(testKey(i), ns)
				var line strings.Builder
				for _, c := range []int{1, 4, 6, 9, 13, 15, 18, 20, 22} {
					line.WriteString(sub.op(c, nil))
					line.WriteByte(';')
				}
				if p == owner {
					got.WriteString(line.String())
					got.WriteByte('\n')
				} else if line.String() != emptyLine {
					t.Fatalf("key %d (group %d) visible in subtask %d: %s", i, kg, p, line.String())
				}
			}
		}
	}
	if got.String() != want {
		t.Fatalf("filtered restore differs:\n got %s\nwant %s", got.String(), want)
	}
}

const emptyLine = "0 false <nil>; false <nil>;[] <nil>;[] <nil>;[] <nil>;[] <nil>;0 false <nil>;0 false <nil>;0 false <nil>;"

func TestKeyedContext_Layout(t *testing.T) {
	be := NewMemory()
	kc, _ := NewKeyedContext(be, "op", KeyedOptions{})
	kc.SetNamespace([]byte("ns")) // before any key: kept
	kc.SetCurrentKey(0x0102, []byte("abc"))
	if got, want := string(kc.stateKey()), "\x01\x02\x03abc\x02ns"; got != want {
		t.Fatalf("key %q, want %q", got, want)
	}
	kc.SetCurrentKey(7, []byte("a"))
	kc.SetNamespace(nil)
	if got, want := string(kc.stateKey()), "\x00\x07\x01a\x00"; got != want {
		t.Fatalf("key %q, want %q", got, want)
	}
	if kg, k := kc.CurrentKey(); kg != 7 || string(k) != "a" {
		t.Fatalf("CurrentKey = %d %q", kg, k)
	}
	// The value envelope: tag 1, then the little-endian payload.
	v, _ := NewValueState(kc, "v", Int64Codec{}, TTLConfig{})
	v.Update(-2)
	b, _ := be.Bucket("op/v", KeyGroupPrefix)
	raw, _, _ := be.Get(b, kc.stateKey())
	if got, want := fmt.Sprintf("%x", raw), "01feffffffffffffff"; got != want {
		t.Fatalf("value %s, want %s", got, want)
	}
	if kgOf, ok := KeyGroupPrefix(kc.stateKey()); !ok || kgOf != 7 {
		t.Fatalf("KeyGroupPrefix = %d %v", kgOf, ok)
	}
}

func TestKeyedContext_Errors(t *testing.T) {
	be := NewMemory()
	kc, _ := NewKeyedContext(be, "op", KeyedOptions{})
	if _, err := NewValueState(kc, "v", Int64Codec{}, TTLConfig{TTL: time.Second, Update: OnCreateAndWrite, Visibility: NeverReturnExpired}); err == nil {
		t.Fatal("TTL without a clock accepted")
	}
	if _, err := NewValueState(kc, "v", Int64Codec{}, TTLConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewListState(kc, "v", Int64Codec{}, TTLConfig{}); err == nil {
		t.Fatal("duplicate state name accepted")
	}
	if _, err := NewKeyedContext(be, "", KeyedOptions{}); err == nil {
		t.Fatal("empty operator accepted")
	}
	// A corrupt stored value is ErrCorrupt, not a panic.
	v, _ := NewValueState(kc, "w", Int64Codec{}, TTLConfig{})
	kc.SetCurrentKey(1, []byte("k"))
	b, _ := be.Bucket("op/w", KeyGroupPrefix)
	for _, raw := range []string{"", "\x07abc", "\x01abc", "\x02abc"} {
		be.Put(b, kc.stateKey(), []byte(raw))
		if _, _, err := v.Value(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("value %q: err %v, want ErrCorrupt", raw, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic without a current key")
		}
	}()
	kc2, _ := NewKeyedContext(be, "op2", KeyedOptions{})
	v2, _ := NewValueState(kc2, "v", Int64Codec{}, TTLConfig{})
	v2.Value()
}

// The typed states against plain Go models, without TTL.
func TestKeyedStates_MatchModel(t *testing.T) {
	be := openTestBolt(t, BoltOptions{CacheBytes: 2 << 10})
	s := newTestStates(t, be, &fakeClock{})
	type kn struct {
		key string
		ns  int
	}
	vals := map[kn]int64{}
	lists := map[kn][]int64{}
	maps := map[kn]map[string]int64{}
	sums := map[kn]int64{}
	r := rand.New(rand.NewPCG(9, 9))
	for step := range 5000 {
		k := kn{testKey(r.IntN(20)), r.IntN(3)}
		s.setKey(k.key, k.ns)
		x := r.Int64N(100)
		switch r.IntN(8) {
		case 0:
			s.val.Update(x)
			vals[k] = x
		case 1:
			v, ok, _ := s.val.Value()
			if w, wok := vals[k]; v != w || ok != wok {
				t.Fatalf("step %d: value %d %v, want %d %v", step, v, ok, w, wok)
			}
		case 2:
			s.lst.Add(x)
			lists[k] = append(lists[k], x)
		case 3:
			l, _ := s.lst.Get(nil)
			if !slices.Equal(l, lists[k]) {
				t.Fatalf("step %d: list %v, want %v", step, l, lists[k])
			}
		case 4:
			mk := fmt.Sprint(x % 5)
			s.mp.Put(mk, x)
			if maps[k] == nil {
				maps[k] = map[string]int64{}
			}
			maps[k][mk] = x
		case 5:
			mk := fmt.Sprint(x % 5)
			s.mp.Remove(mk)
			delete(maps[k], mk)
		case 6:
			got := map[string]int64{}
			s.mp.Range(func(mk string, v int64) bool { got[mk] = v; return true })
			if fmt.Sprint(got) != fmt.Sprint(maps[k]) && !(len(got) == 0 && len(maps[k]) == 0) {
				t.Fatalf("step %d: map %v, want %v", step, got, maps[k])
			}
		case 7:
			s.red.Add(x)
			sums[k] += x
			if v, _, _ := s.red.Get(); v != sums[k] {
				t.Fatalf("step %d: sum %d, want %d", step, v, sums[k])
			}
		}
	}
}

// Session-window merging: the sources' contents move into the target and
// the sources are cleared; the current namespace is kept.
func TestKeyedStates_MergeNamespaces(t *testing.T) {
	s := newTestStates(t, NewMemory(), &fakeClock{})
	s.setKey("k", 1)
	s.lst.Add(1)
	s.red.Add(1)
	s.agg.Add(1)
	s.setKey("k", 2)
	s.lst.Add(2)
	s.red.Add(2)
	s.agg.Add(4)
	s.kc.SetNamespace([]byte("current"))
	if err := s.lst.MergeNamespaces(nsBytes(2), nsBytes(1), nsBytes(2)); err != nil {
		t.Fatal(err)
	}
	s.red.MergeNamespaces(nsBytes(2), nsBytes(1))
	s.agg.MergeNamespaces(nsBytes(2), nsBytes(1))
	if string(s.kc.Namespace()) != "current" {
		t.Fatalf("namespace %q after merge", s.kc.Namespace())
	}
	s.kc.SetNamespace(nsBytes(2))
	l, _ := s.lst.Get(nil)
	red, _, _ := s.red.Get()
	avg, _, _ := s.agg.Get()
	if !slices.Equal(l, []int64{2, 1}) || red != 3 || avg != 2.5 {
		t.Fatalf("merged list %v, sum %d, avg %v", l, red, avg)
	}
	s.kc.SetNamespace(nsBytes(1))
	l, _ = s.lst.Get(nil)
	_, rok, _ := s.red.Get()
	_, aok, _ := s.agg.Get()
	if len(l) != 0 || rok || aok {
		t.Fatalf("source not cleared: %v %v %v", l, rok, aok)
	}
}
