package window

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eddy-edge/eddy/window/aggregate"
)

// Timer keys sorted as bytes come out in PopTimer's order: (domain, time,
// key bytes, window).
func TestAppendTimerKey_Order(t *testing.T) {
	seed := uint64(99)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	keys := [][]byte{nil, {0}, {0, 0}, {0, 1}, {1}, []byte("a"), []byte("a\x00"), []byte("ab"), {0xFF}, {0xFF, 0}}
	times := []int64{math.MinInt64, -5, -1, 0, 1, 7, math.MaxInt64}
	var ts []Timer
	for range 500 {
		k := keys[r.IntN(len(keys))]
		s := times[r.IntN(len(times))]
		ts = append(ts, Timer{Domain: Domain(1 + r.IntN(2)), Time: times[r.IntN(len(times))], KeyGroup: uint16(r.IntN(3)),
			Key: k, Window: Window{s, s + int64(r.IntN(3))}})
	}
	enc := make([][]byte, len(ts))
	for i, tm := range ts {
		enc[i] = AppendTimerKey(nil, tm.Domain, tm.Time, tm.KeyGroup, tm.Key, tm.Window)
		got, err := ParseTimerKey(enc[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Domain != tm.Domain || got.Time != tm.Time || got.KeyGroup != tm.KeyGroup || !bytes.Equal(got.Key, tm.Key) || got.Window != tm.Window {
			t.Fatalf("round trip: got %+v, want %+v", got, tm)
		}
	}
	byBytes := slices.Clone(ts)
	idx := make([]int, len(ts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return bytes.Compare(enc[a], enc[b]) })
	for i, j := range idx {
		byBytes[i] = ts[j]
	}
	for i := 1; i < len(byBytes); i++ {
		a, b := byBytes[i-1], byBytes[i]
		c := cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Time, b.Time), bytes.Compare(a.Key, b.Key),
			cmp.Compare(a.KeyGroup, b.KeyGroup), cmp.Compare(a.Window.Start, b.Window.Start), cmp.Compare(a.Window.End, b.Window.End))
		if c > 0 {
			t.Fatalf("byte order differs from (domain, time, key, window): %+v before %+v", a, b)
		}
	}
}

func TestAppendWindowKey_Layout(t *testing.T) {
	got := AppendWindowKey(nil, 0x0102, []byte("k"), Window{-1, 0})
	want := []byte{1, 2, 1, 'k', 'w', 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x, want % x", got, want)
	}
	if p := AppendKeyPrefix(nil, 0x0102, []byte("k")); !bytes.HasPrefix(AppendMergingSetKey(nil, 0x0102, []byte("k")), p) ||
		!bytes.HasPrefix(AppendCountKey(nil, 0x0102, []byte("k")), p) {
		t.Fatal("namespaced keys do not share the key prefix")
	}
}

func TestWindowState_RoundTrip(t *testing.T) {
	funcs := []aggregate.Func{aggregate.Count, aggregate.Avg, aggregate.Percentile}
	st := WindowState{Fired: 3, SinceFire: 1, NextEarly: NoTimer, Accs: make([]aggregate.Acc, 3)}
	for i, v := range []float64{1, 2, 30} {
		for j, f := range funcs {
			st.Accs[j].Add(f, v, int64(i), true)
		}
	}
	enc := AppendWindowState(nil, funcs, &st)
	var got WindowState
	if err := DecodeWindowState(enc, funcs, &got); err != nil {
		t.Fatal(err)
	}
	if got.Fired != 3 || got.SinceFire != 1 || got.NextEarly != NoTimer {
		t.Fatalf("header %+v", got)
	}
	for j, f := range funcs {
		if a, b := got.Accs[j].Result(f, 0.5), st.Accs[j].Result(f, 0.5); a != b {
			t.Fatalf("%v: %v, want %v", f, a, b)
		}
	}
	for _, bad := range [][]byte{nil, {2}, enc[:len(enc)-1], append(slices.Clone(enc), 0)} {
		if err := DecodeWindowState(bad, funcs, &got); err == nil {
			t.Fatalf("decoded corrupt % x", bad)
		}
	}
	if err := DecodeWindowState([]byte{9}, funcs, &got); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("err %v, want ErrCorruptState", err)
	}
}

func TestWindows_RoundTrip(t *testing.T) {
	ws := []Window{{-5, 10}, {20, 30}, GlobalWindow}
	got, err := DecodeWindows(AppendWindows(nil, ws), nil)
	if err != nil || !slices.Equal(got, ws) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := DecodeWindows([]byte{5, 1}, nil); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("err %v", err)
	}
}
