package state

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func ttlConfig(ms int64, u TTLUpdate, v TTLVisibility) TTLConfig {
	return TTLConfig{TTL: time.Duration(ms) * time.Millisecond, Update: u, Visibility: v}
}

// Flink's TTL rules on a fake clock: a value written at w with TTL d is
// expired at now ≥ w+d; OnReadAndWrite moves w on reads; visibility decides
// whether an expired, uncleaned value is returned (once).
func TestValueState_TTL(t *testing.T) {
	type step struct {
		at    int64
		write bool // else read
		want  bool // read: present
	}
	tests := []struct {
		name  string
		cfg   TTLConfig
		steps []step
	}{
		{"create and write", ttlConfig(10, OnCreateAndWrite, NeverReturnExpired), []step{
			{0, true, false}, {9, false, true}, {9, false, true}, {10, false, false}, {11, false, false},
		}},
		{"write restarts", ttlConfig(10, OnCreateAndWrite, NeverReturnExpired), []step{
			{0, true, false}, {8, true, false}, {17, false, true}, {18, false, false},
		}},
		{"read and write", ttlConfig(10, OnReadAndWrite, NeverReturnExpired), []step{
			{0, true, false}, {9, false, true}, {18, false, true}, {27, false, true}, {37, false, false},
		}},
		{"return expired once", ttlConfig(10, OnCreateAndWrite, ReturnExpiredIfNotCleanedUp), []step{
			{0, true, false}, {10, false, true}, {10, false, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{}
			for _, be := range []Backend{NewMemory(), openTestBolt(t, BoltOptions{})} {
				kc, _ := NewKeyedContext(be, "op", KeyedOptions{Now: clock.now})
				v, err := NewValueState(kc, "v", Int64Codec{}, tt.cfg)
				if err != nil {
					t.Fatal(err)
				}
				kc.SetCurrentKey(3, []byte("k"))
				for i, s := range tt.steps {
					clock.ms = 1_000_000 + s.at
					if s.write {
						if err := v.Update(int64(i)); err != nil {
							t.Fatal(err)
						}
						continue
					}
					if _, ok, err := v.Value(); ok != s.want || err != nil {
						t.Fatalf("%T step %d at %d: present %v (%v), want %v", be, i, s.at, ok, err, s.want)
					}
				}
			}
		})
	}
}

func TestTTLConfig_Invalid(t *testing.T) {
	kc, _ := NewKeyedContext(NewMemory(), "op", KeyedOptions{Now: func() int64 { return 0 }})
	for i, cfg := range []TTLConfig{
		{TTL: time.Second},
		{TTL: time.Second, Update: OnCreateAndWrite},
		{TTL: time.Second, Visibility: NeverReturnExpired},
		{TTL: time.Microsecond, Update: OnCreateAndWrite, Visibility: NeverReturnExpired},
	} {
		if _, err := NewValueState(kc, fmt.Sprint("v", i), Int64Codec{}, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// List elements and map entries expire one by one.
func TestListAndMapState_TTLPerElement(t *testing.T) {
	clock := &fakeClock{ms: 100}
	kc, _ := NewKeyedContext(NewMemory(), "op", KeyedOptions{Now: clock.now})
	l, _ := NewListState(kc, "l", Int64Codec{}, ttlConfig(10, OnCreateAndWrite, NeverReturnExpired))
	m, _ := NewMapState(kc, "m", StringCodec{}, Int64Codec{}, ttlConfig(10, OnCreateAndWrite, NeverReturnExpired))
	kc.SetCurrentKey(1, []byte("k"))
	l.Add(1)
	m.Put("a", 1)
	clock.ms = 105
	l.Add(2)
	m.Put("b", 2)
	clock.ms = 110
	got, _ := l.Get(nil)
	var keys []string
	m.Range(func(k string, _ int64) bool { keys = append(keys, k); return true })
	if !slices.Equal(got, []int64{2}) || !slices.Equal(keys, []string{"b"}) {
		t.Fatalf("at 110: list %v map %v, want [2] [b]", got, keys)
	}
	clock.ms = 115
	got, _ = l.Get(got[:0])
	empty, _ := m.IsEmpty()
	if len(got) != 0 || !empty {
		t.Fatalf("at 115: list %v, map empty %v", got, empty)
	}
}

// Cleanup examines a bounded number of entries per call, resumes where it
// stopped, and deletes what expired (values, maps) or rewrites lists.
func TestKeyedContext_CleanupBounded(t *testing.T) {
	clock := &fakeClock{ms: 1000}
	be := openTestBolt(t, BoltOptions{})
	kc, _ := NewKeyedContext(be, "op", KeyedOptions{Now: clock.now})
	v, _ := NewValueState(kc, "v", Int64Codec{}, ttlConfig(10, OnCreateAndWrite, NeverReturnExpired))
	l, _ := NewListState(kc, "l", Int64Codec{}, ttlConfig(10, OnCreateAndWrite, NeverReturnExpired))
	plain, _ := NewValueState(kc, "plain", Int64Codec{}, TTLConfig{})
	const n = 100
	for i := range n {
		kc.SetCurrentKey(uint16(i%128), fmt.Append(nil, i))
		v.Update(int64(i))
		l.Add(int64(i))
		plain.Update(int64(i))
	}
	clock.ms = 1005
	for i := 1; i < n; i += 2 { // odd keys are rewritten later, so survive
		kc.SetCurrentKey(uint16(i%128), fmt.Append(nil, i))
		v.Update(int64(i))
		l.Add(int64(i))
	}
	clock.ms = 1012
	count := func(name string) int {
		b, _ := be.Bucket(name, KeyGroupPrefix)
		c := 0
		be.Scan(b, nil, func(_, _ []byte) bool { c++; return true })
		return c
	}
	if got, err := kc.Cleanup(30); got != 30 || err != nil {
		t.Fatalf("Cleanup(30) = %d, %v", got, err)
	}
	if c := count("op/v"); c >= n || c < n/2 {
		t.Fatalf("after one bounded call %d values left", c)
	}
	for range 10 {
		if _, err := kc.Cleanup(30); err != nil {
			t.Fatal(err)
		}
	}
	if c, cl, cp := count("op/v"), count("op/l"), count("op/plain"); c != n/2 || cl != n/2 || cp != n {
		t.Fatalf("after cleanup: %d values, %d lists, %d plain; want %d, %d, %d", c, cl, cp, n/2, n/2, n)
	}
	// The surviving lists lost their expired first element.
	kc.SetCurrentKey(1, fmt.Append(nil, 1))
	b, _ := be.Bucket("op/l", KeyGroupPrefix)
	raw, _, _ := be.Get(b, kc.stateKey())
	if len(raw) != 1+8+1+8 {
		t.Fatalf("list value of %d bytes after cleanup, want one stamped element", len(raw))
	}
}

// FilterSnapshot drops expired values from a full snapshot and turns them
// into deletions in an incremental one.
func TestKeyedContext_FilterSnapshot(t *testing.T) {
	clock := &fakeClock{ms: 0}
	be := NewMemory()
	kc, _ := NewKeyedContext(be, "op", KeyedOptions{Now: clock.now})
	v, _ := NewValueState(kc, "v", Int64Codec{}, ttlConfig(10, OnCreateAndWrite, NeverReturnExpired))
	plain, _ := NewValueState(kc, "plain", Int64Codec{}, TTLConfig{})
	for i := range 4 {
		clock.ms = int64(i) * 5
		kc.SetCurrentKey(0, []byte{byte(i)})
		v.Update(1)
		plain.Update(1)
	}
	clock.ms = 20 // values written at 0, 5 and 10 are expired; 15 is not
	entries := func(s Snapshot) (live, deleted int) {
		t.Helper()
		if err := s.Entries(func(b, _, _ []byte, del bool) error {
			if string(b) == "op/v" {
				if del {
					deleted++
				} else {
					live++
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return
	}
	snap, _ := be.Snapshot(false)
	live, del := entries(kc.FilterSnapshot(snap))
	if !snap.Incremental() || live != 1 || del != 3 {
		t.Fatalf("incremental: %d live, %d deleted; want 1, 3", live, del)
	}
	full, _ := be.Snapshot(true)
	if live, del = entries(kc.FilterSnapshot(full)); live != 1 || del != 0 {
		t.Fatalf("full: %d live, %d deleted; want 1, 0", live, del)
	}
}

// TestTTLPolicy_ExpiredAtTheEdges: the expiry test does not overflow when
// the clock sits at either end of int64.
func TestTTLPolicy_ExpiredAtTheEdges(t *testing.T) {
	p := ttlPolicy{ms: 1000}
	for _, tc := range []struct {
		ts, now int64
		want    bool
	}{
		{0, 999, false},
		{0, 1000, true},
		{0, math.MinInt64, false},
		{math.MinInt64, math.MinInt64 + 999, false},
		{math.MinInt64, math.MinInt64 + 1000, true},
		{math.MaxInt64 - 1000, math.MaxInt64, true},
	} {
		if got := p.expired(tc.ts, tc.now); got != tc.want {
			t.Errorf("expired(%d, %d) = %v, want %v", tc.ts, tc.now, got, tc.want)
		}
	}
}
