package keyed

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/state"
)

// TestObjectCache_AnySizeSameOutput runs an out-of-order stream with string
// state and a TTL that expires keys, checkpointed mid-stream and restored
// into a new operator, with object caches from none (every key read and
// written through the backend) through a few keys (constant eviction) to
// all keys: every key's outputs and the late readings equal those of an
// uninterrupted run on the in-memory backend. The snapshot is taken after
// Flush, so it holds what the cache had not written back yet.
func TestObjectCache_AnySizeSameOutput(t *testing.T) {
	maps := []string{"p=prev(event.s)", "c=changed(event.v)", "d=delta(event.c)", "s=since(event.v)", "n=count_key()"}
	in := genInput(11, 3000)
	for _, order := range []Order{EventTime, Arrival} {
		want := newHarness(t, order, 300*time.Millisecond, "", maps...)
		want.start(state.NewMemory())
		var maxT int64
		want.feed(in, 0, len(in), &maxT)
		want.watermark(math.MaxInt64)
		for _, tc := range []struct {
			name  string
			bytes int
		}{
			{"none", 1},
			{"few keys", 2 << 10},
			{"all keys", 1 << 20},
		} {
			t.Run(map[Order]string{EventTime: "event_time", Arrival: "arrival"}[order]+"/"+tc.name, func(t *testing.T) {
				got := newHarness(t, order, 300*time.Millisecond, "", maps...)
				got.opts.CacheBytes = tc.bytes
				be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{CacheBytes: 64 << 10})
				if err != nil {
					t.Fatal(err)
				}
				defer be.Close()
				got.start(be)
				maxT = 0
				got.feed(in, 0, 1500, &maxT)
				if err := got.ops[0].Flush(); err != nil {
					t.Fatal(err)
				}
				if tc.bytes > 1 && got.ops[0].objs.Bytes() == 0 {
					t.Fatal("nothing cached: the test would not cover the cache")
				}
				if n := got.ops[0].objs.Bytes(); n > tc.bytes {
					t.Fatalf("the cache holds %d bytes, over its budget of %d", n, tc.bytes)
				}
				snap, err := be.Snapshot(true)
				if err != nil {
					t.Fatal(err)
				}
				snap = got.ops[0].FilterSnapshot(snap)
				outAt, lateAt, maxTAt, wmAt := len(got.out), len(got.late), maxT, got.wm
				got.feed(in, 1500, 1700, &maxT) // lost with the process
				got.out, got.late = got.out[:outAt], got.late[:lateAt]
				m := state.NewMemory()
				got.start(m)
				if err := m.Restore(snap.Entries, state.RestoreOptions{}); err != nil {
					t.Fatal(err)
				}
				snap.Close()
				got.ops[0].SetWatermark(wmAt)
				got.wm, maxT = wmAt, maxTAt
				got.feed(in, 1500, len(in), &maxT)
				got.watermark(math.MaxInt64)
				if a, b := perKey(got.out), perKey(want.out); fmt.Sprint(a) != fmt.Sprint(b) {
					for k := range b {
						if a[k] != b[k] {
							t.Fatalf("key %s after restore:\n%s\nwant\n%s", k, a[k], b[k])
						}
					}
					t.Fatal("outputs differ")
				}
				if fmt.Sprint(got.late) != fmt.Sprint(want.late) {
					t.Fatalf("late readings differ:\n%v\nwant\n%v", got.late, want.late)
				}
			})
		}
	}
}

// TestObjectCache_RestoreInPlaceDropsCache restores a backend under a
// running operator whose cache holds newer, unwritten state: the operator
// must continue from the restored state, not from its cache.
func TestObjectCache_RestoreInPlaceDropsCache(t *testing.T) {
	h := newHarness(t, Arrival, 0, "", "n=count_key()", "p=prev(event.v)")
	be := state.NewMemory()
	h.start(be)
	h.reading("a", 1, 1, `{"v":1}`)
	if err := h.ops[0].Flush(); err != nil {
		t.Fatal(err)
	}
	snap, err := be.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	h.reading("a", 2, 2, `{"v":2}`) // cached, never written back
	if err := be.Restore(snap.Entries, state.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	snap.Close()
	h.reading("a", 3, 3, `{"v":3}`)
	want := []string{"a 1 1 n=1 p=null", "a 2 2 n=2 p=1", "a 3 3 n=2 p=1"}
	if fmt.Sprint(h.out) != fmt.Sprint(want) {
		t.Fatalf("outputs %q, want %q", h.out, want)
	}
}

// TestObjectCache_ExpiredNeverReturned reads a key again after its
// state_ttl passed while its state is still cached: it is a new key.
func TestObjectCache_ExpiredNeverReturned(t *testing.T) {
	h := newHarness(t, Arrival, time.Second, "", "n=count_key()", "p=prev(event.v)")
	h.start(state.NewMemory())
	h.reading("a", 1000, 1, `{"v":1}`)
	h.reading("a", 1999, 2, `{"v":2}`) // 999 ms later: live
	h.reading("a", 2999, 3, `{"v":3}`) // 1000 ms after the last write: expired
	want := []string{"a 1000 1 n=1 p=null", "a 1999 2 n=2 p=1", "a 2999 3 n=1 p=null"}
	if fmt.Sprint(h.out) != fmt.Sprint(want) {
		t.Fatalf("outputs %q, want %q", h.out, want)
	}
	if h.ops[0].objs.Bytes() == 0 {
		t.Fatal("the key was not cached: the test would not cover the cache")
	}
}
