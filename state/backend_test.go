package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func openTestBolt(t testing.TB, opts BoltOptions) *Bolt {
	t.Helper()
	if opts.MaxSize == 0 {
		opts.MaxSize = 32 << 20 // tests keep files small (also under 32-bit emulation)
	}
	be, err := OpenBolt(filepath.Join(t.TempDir(), "state.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// chain collects snapshots as a checkpoint would: a base, then increments.
type chain struct {
	entries []chainEntry
}

type chainEntry struct {
	bucket, key, value []byte
	deleted            bool
}

func (c *chain) take(t testing.TB, be Backend, full bool) Snapshot {
	t.Helper()
	snap, err := be.Snapshot(full)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Incremental() {
		c.entries = c.entries[:0]
	}
	if err := snap.Entries(func(b, k, v []byte, del bool) error {
		c.entries = append(c.entries, chainEntry{bytes.Clone(b), bytes.Clone(k), bytes.Clone(v), del})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return snap
}

func (c *chain) source() Entries {
	return func(fn func(b, k, v []byte, del bool) error) error {
		for _, e := range c.entries {
			if err := fn(e.bucket, e.key, e.value, e.deleted); err != nil {
				return err
			}
		}
		return nil
	}
}

// dump returns every entry of every named bucket, via Scan.
func dump(t testing.TB, be Backend, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		b, err := be.Bucket(n, KeyGroupPrefix)
		if err != nil {
			t.Fatal(err)
		}
		var last []byte
		err = be.Scan(b, nil, func(k, v []byte) bool {
			if last != nil && bytes.Compare(last, k) >= 0 {
				t.Fatalf("scan out of order: %q after %q", k, last)
			}
			last = bytes.Clone(k)
			out[n+"|"+string(k)] = string(v)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func randKey(r *rand.Rand) []byte {
	k := []byte{0, byte(r.IntN(4))}
	return fmt.Appendf(k, "key-%d", r.IntN(300))
}

// Random operation sequences give the same gets, scans and snapshots on
// Memory and on Bolt (with a cache small enough to evict and flush all the
// time), and restoring a checkpoint chain into a fresh backend of either kind
// reproduces the state (memory vs bbolt, reopen included).
// With the large cache most entries are still dirty (not written back) at a
// snapshot, which then reads them from its copy of the cache rather than
// from bbolt; the snapshots' entries must equal Memory's.
func TestBackend_MemoryMatchesBolt(t *testing.T) {
	for _, cache := range []int{4 << 10, 1 << 20} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testMemoryMatchesBolt(t, cache) })
	}
}

func testMemoryMatchesBolt(t *testing.T, cacheBytes int) {
	seed := uint64(4)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	names := []string{"op/a", "op/b", "other/x"}
	for iter := range 20 {
		bes := []Backend{NewMemoryWithLimits(ChangeLimits{MinKeys: 50}), openTestBolt(t, BoltOptions{CacheBytes: cacheBytes, FlushBatch: 7, Changes: ChangeLimits{MinKeys: 50}})}
		chains := make([]chain, len(bes))
		for step := range 2000 {
			b := Bucket(r.IntN(len(names)))
			key := randKey(r)
			op := r.IntN(100)
			v := bytes.Repeat([]byte{byte(step)}, r.IntN(40))
			var results []string
			for i, be := range bes {
				for _, n := range names {
					if _, err := be.Bucket(n, KeyGroupPrefix); err != nil {
						t.Fatal(err)
					}
				}
				var res string
				switch {
				case op < 40:
					if err := be.Put(b, key, v); err != nil {
						t.Fatal(err)
					}
				case op < 60:
					if err := be.Delete(b, key); err != nil {
						t.Fatal(err)
					}
				case op < 95:
					v, ok, err := be.Get(b, key)
					if err != nil {
						t.Fatal(err)
					}
					res = fmt.Sprint(ok, v)
				case op < 97:
					before := len(chains[i].entries)
					snap := chains[i].take(t, be, op == 96)
					if !snap.Incremental() {
						before = 0
					}
					res = fmt.Sprint(snap.Incremental(), chains[i].entries[before:]) // the snapshot's entries
					snap.Close()
				default:
					u := be.Usage() // before dump's Scan flushes Bolt's cache
					d := dump(t, be, names)
					res = fmt.Sprint(len(d))
					if u.Keys != len(d) {
						t.Fatalf("iter %d step %d: %T.Usage().Keys = %d, want %d", iter, step, be, u.Keys, len(d))
					}
					if _, mem := be.(*Memory); mem && u.MemoryBytes != entryBytes(d) {
						t.Fatalf("iter %d step %d: Memory.Usage().MemoryBytes = %d, want %d", iter, step, u.MemoryBytes, entryBytes(d))
					}
				}
				results = append(results, res)
			}
			if results[0] != results[1] {
				t.Fatalf("iter %d step %d op %d: memory %s, bolt %s", iter, step, op, results[0], results[1])
			}
		}
		want := dump(t, bes[0], names)
		if got := dump(t, bes[1], names); !mapsEqual(got, want) {
			t.Fatalf("iter %d: bolt and memory differ", iter)
		}
		for i, be := range bes {
			chains[i].take(t, be, false).Close()
			for _, fresh := range []Backend{NewMemory(), openTestBolt(t, BoltOptions{CacheBytes: 8 << 10})} {
				if err := fresh.Restore(chains[i].source(), RestoreOptions{}); err != nil {
					t.Fatal(err)
				}
				if got := dump(t, fresh, names); !mapsEqual(got, want) {
					t.Fatalf("iter %d: restore of chain %d into %T: %d entries, want %d", iter, i, fresh, len(got), len(want))
				}
				if m, ok := fresh.(*Memory); ok {
					if u := m.Usage(); u.Keys != len(want) || u.MemoryBytes != entryBytes(want) {
						t.Fatalf("iter %d: restored Memory's usage = %+v, want %d keys of %d bytes", iter, u, len(want), entryBytes(want))
					}
				}
				fresh.Close()
			}
		}
	}
}

// entryBytes is the key and value bytes of dump's entries (its keys carry
// the bucket name and a separator, which a backend does not store).
func entryBytes(d map[string]string) int64 {
	var n int64
	for k, v := range d {
		n += int64(len(k) - strings.IndexByte(k, '|') - 1 + len(v))
	}
	return n
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// An incremental snapshot yields exactly the keys written or deleted since
// the previous one, with their values at the barrier, while writes after the
// barrier stay invisible to it.
func TestBolt_SnapshotIncremental(t *testing.T) {
	for _, be := range []Backend{NewMemory(), openTestBolt(t, BoltOptions{CacheBytes: 1 << 10})} {
		b, _ := be.Bucket("b", KeyGroupPrefix)
		for i := range 100 {
			be.Put(b, fmt.Appendf(nil, "\x00\x00k%03d", i), []byte("v0"))
		}
		base, _ := be.Snapshot(false) // not read
		base.Close()
		be.Put(b, []byte("\x00\x00k005"), []byte("v1"))
		be.Delete(b, []byte("\x00\x00k007"))
		be.Delete(b, []byte("\x00\x00nope")) // absent: no change
		be.Put(b, []byte("\x00\x00k200"), []byte("v1"))
		var c chain
		snap := c.take(t, be, false)
		be.Put(b, []byte("\x00\x00k005"), []byte("after"))
		be.Flush()
		c.entries = nil
		snap.Entries(func(bk, k, v []byte, del bool) error {
			c.entries = append(c.entries, chainEntry{bytes.Clone(bk), bytes.Clone(k), bytes.Clone(v), del})
			return nil
		})
		snap.Close()
		var got []string
		for _, e := range c.entries {
			got = append(got, fmt.Sprintf("%s %q %q %v", e.bucket, e.key, e.value, e.deleted))
		}
		want := []string{`b "\x00\x00k005" "v1" false`, `b "\x00\x00k007" "" true`, `b "\x00\x00k200" "v1" false`}
		if !slices.Equal(got, want) || !snap.Incremental() {
			t.Fatalf("%T: incremental %v entries\n%s\nwant\n%s", be, snap.Incremental(), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// Past its bound the change set gives up and the next snapshot is full.
// Changed keys the cache holds cost the change set no memory (a flag); the
// bytes bound counts the changed keys evicted before the snapshot, which a
// one-byte cache evicts at once.
func TestChangeSet_Overflow(t *testing.T) {
	tests := []struct {
		name    string
		limits  ChangeLimits
		cache   int
		changes int
		full    bool
	}{
		{"within fraction", ChangeLimits{MinKeys: 10, MaxFraction: 0.25}, 0, 20, false},
		{"over fraction", ChangeLimits{MinKeys: 10, MaxFraction: 0.25}, 0, 30, true},
		{"cached, bytes not held", ChangeLimits{MinKeys: 1000, MaxBytes: 1000}, 0, 20, false},
		{"evicted, over bytes", ChangeLimits{MinKeys: 1000, MaxBytes: 1000}, 1, 25, true},
		{"evicted, within bytes", ChangeLimits{MinKeys: 1000, MaxBytes: 1000}, 1, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := openTestBolt(t, BoltOptions{Changes: tt.limits, CacheBytes: tt.cache})
			b, _ := be.Bucket("b", nil)
			for i := range 100 {
				be.Put(b, fmt.Appendf(nil, "k%03d", i), nil)
			}
			s, _ := be.Snapshot(false)
			s.Close()
			for i := range tt.changes {
				be.Put(b, fmt.Appendf(nil, "k%03d", i), []byte("x"))
			}
			s, err := be.Snapshot(false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Incremental() == tt.full {
				t.Fatalf("incremental = %v, want %v", s.Incremental(), !tt.full)
			}
		})
	}
}

// A restore with a key-group range keeps the range's entries and those of
// unkeyed buckets, and refuses buckets of unknown layout.
func TestBackend_RestoreKeyGroups(t *testing.T) {
	src := NewMemory()
	keyed, _ := src.Bucket("keyed", KeyGroupPrefix)
	plain, _ := src.Bucket("plain", nil)
	for kg := range 8 {
		src.Put(keyed, []byte{0, byte(kg), 'k'}, []byte{byte(kg)})
	}
	src.Put(plain, []byte("offsets"), []byte("42"))
	var c chain
	c.take(t, src, true).Close()
	r, _ := SubtaskKeyGroups(1, 2, 8) // [4, 7]
	for _, dst := range []Backend{NewMemory(), openTestBolt(t, BoltOptions{})} {
		if err := dst.Restore(c.source(), RestoreOptions{KeyGroups: &r}); !errors.Is(err, ErrUnknownBucket) {
			t.Fatalf("%T: unregistered bucket: %v", dst, err)
		}
		dst.Bucket("keyed", KeyGroupPrefix)
		dst.Bucket("plain", nil)
		if err := dst.Restore(c.source(), RestoreOptions{KeyGroups: &r}); err != nil {
			t.Fatal(err)
		}
		got := dump(t, dst, []string{"keyed", "plain"})
		if len(got) != 5 || got["plain|offsets"] != "42" || got["keyed|\x00\x04k"] != "\x04" || got["keyed|\x00\x03k"] != "" {
			t.Fatalf("%T: restored %q", dst, got)
		}
	}
}

func TestSubtaskKeyGroups(t *testing.T) {
	for _, p := range []int{1, 2, 3, 5, 7, 128, 200} {
		for kg := range 128 {
			want := Subtask(uint16(kg), p, 128)
			r, ok := SubtaskKeyGroups(want, p, 128)
			if !ok || !r.Contains(uint16(kg)) {
				t.Fatalf("p=%d kg=%d: subtask %d has %v %v", p, kg, want, r, ok)
			}
		}
	}
}

// Writing past MaxSize fails with ErrFull and a message that says what to
// do, never a crash; the error is sticky.
func TestBolt_Full(t *testing.T) {
	be := openTestBolt(t, BoltOptions{MaxSize: 1 << 20, CacheBytes: 64 << 10})
	b, _ := be.Bucket("b", nil)
	val := bytes.Repeat([]byte("x"), 512)
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		err = be.Put(b, fmt.Appendf(nil, "k%06d", i), val)
	}
	if err == nil {
		err = be.Flush()
	}
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "state store full") || !strings.Contains(err.Error(), "raise state.max_size") {
		t.Fatalf("err = %v, want ErrFull", err)
	}
	if _, _, err2 := be.Get(b, []byte("k000001")); !errors.Is(err2, ErrFull) {
		t.Fatalf("sticky: %v", err2)
	}
}

// OpenBolt discards an existing working file: it is never trusted.
func TestOpenBolt_DiscardsOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	be, err := OpenBolt(path, BoltOptions{MaxSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := be.Bucket("b", nil)
	be.Put(b, []byte("k"), []byte("v"))
	be.Flush()
	be.Close()
	be, err = OpenBolt(path, BoltOptions{MaxSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	b, _ = be.Bucket("b", nil)
	if _, ok, _ := be.Get(b, []byte("k")); ok {
		t.Fatal("old working file was trusted")
	}
}

// A snapshot read in another goroutine sees the barrier's state while the
// owner keeps writing and writing back (run with -race): with a small cache
// the barrier's state is mostly in bbolt, with a large one mostly in dirty
// cache entries that are written back after the barrier.
func TestBolt_SnapshotConcurrentWithWrites(t *testing.T) {
	for _, cache := range []int{4 << 10, 1 << 20} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testSnapshotConcurrentWithWrites(t, cache) })
	}
}

func testSnapshotConcurrentWithWrites(t *testing.T, cacheBytes int) {
	be := openTestBolt(t, BoltOptions{CacheBytes: cacheBytes, FlushBatch: 10})
	b, _ := be.Bucket("b", nil)
	for i := range 500 {
		be.Put(b, fmt.Appendf(nil, "k%04d", i), []byte("before"))
	}
	snap, err := be.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		n := 0
		err := snap.Entries(func(_, k, v []byte, _ bool) error {
			if string(v) != "before" {
				return fmt.Errorf("%s = %s", k, v)
			}
			n++
			return nil
		})
		if err == nil && n != 500 {
			err = fmt.Errorf("%d entries", n)
		}
		done <- errors.Join(err, snap.Close())
	}()
	for i := range 2000 {
		if err := be.Put(b, fmt.Appendf(nil, "k%04d", i), []byte("after")); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestBolt_UsageFileBytes: the working file's size in use grows with what
// is written back, stays within MaxSize, and Usage's look-ups of dirty keys
// leave Flush writing the same state.
func TestBolt_UsageFileBytes(t *testing.T) {
	be := openTestBolt(t, BoltOptions{CacheBytes: 1 << 20})
	b, err := be.Bucket("op/a", KeyGroupPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Flush(); err != nil {
		t.Fatal(err)
	}
	empty := be.Usage()
	if empty.Keys != 0 || empty.FileBytes <= 0 {
		t.Fatalf("empty store: %+v", empty)
	}
	value := bytes.Repeat([]byte{7}, 100)
	for i := range 5000 {
		if err := be.Put(b, fmt.Appendf([]byte{0, 1}, "key-%05d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	dirty := be.Usage()
	if dirty.Keys != 5000 || dirty.MemoryBytes < 5000*100 {
		t.Fatalf("5000 keys in the cache: %+v", dirty)
	}
	if err := be.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 { // deletes of written-back keys, not yet flushed
		if err := be.Delete(b, fmt.Appendf([]byte{0, 1}, "key-%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
	u := be.Usage()
	if u.Keys != 4000 || u.FileBytes < 5000*100 || u.FileBytes > int64(32<<20) {
		t.Fatalf("after 5000 puts and 1000 deletes: %+v", u)
	}
	if got := len(dump(t, be, []string{"op/a"})); got != 4000 {
		t.Fatalf("the store holds %d keys, want 4000", got)
	}
}

// WrittenBytes counts whole pages: the wear of one changed key is a leaf
// page, its branch pages and a meta page, not its bytes; a snapshot
// writes nothing to the file.
func TestBolt_UsageWrittenBytes(t *testing.T) {
	be := openTestBolt(t, BoltOptions{CacheBytes: 4 << 20})
	b, err := be.Bucket("op/a", KeyGroupPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if got := be.Usage().WrittenBytes; got != 0 {
		t.Fatalf("a new store wrote %d bytes", got)
	}
	value := bytes.Repeat([]byte{7}, 100)
	for i := range 5000 {
		if err := be.Put(b, fmt.Appendf([]byte{0, 1}, "key-%05d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Flush(); err != nil {
		t.Fatal(err)
	}
	loaded := be.Usage().WrittenBytes
	if loaded < 5000*100 || loaded > 4*5000*(100+16) {
		t.Fatalf("5000 keys of 100 bytes wrote %d bytes", loaded)
	}
	snap, err := be.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if got := be.Usage().WrittenBytes; got != loaded {
		t.Fatalf("a snapshot wrote %d bytes to the working file", got-loaded)
	}
	if err := be.Put(b, []byte("\x00\x01key-02500"), value); err != nil {
		t.Fatal(err)
	}
	if err := be.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := be.Usage().WrittenBytes - loaded; got < 2*4096 {
		t.Fatalf("one changed key wrote %d bytes, want a leaf page and a meta page at least", got)
	}

	// A restore counts the base it writes.
	full, err := be.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	fresh := openTestBolt(t, BoltOptions{CacheBytes: 4 << 20})
	if _, err := fresh.Bucket("op/a", KeyGroupPrefix); err != nil {
		t.Fatal(err)
	}
	err = fresh.Restore(full.Entries, RestoreOptions{})
	full.Close()
	if err != nil {
		t.Fatal(err)
	}
	if u := fresh.Usage(); u.WrittenBytes < 5000*100 || u.WrittenBytes < u.FileBytes/2 {
		t.Fatalf("a restore of 5000 keys of 100 bytes: %+v", u)
	}
}
