package state

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// coldFile is a snapshot as the checkpoint layer writes it: entries in
// (bucket, key) order, deletions included for an incremental one.
type coldFile []coldEntry

type coldEntry struct {
	bucket, key string
	val         []byte
	deleted     bool
}

// memCold is an in-memory Cold over files, newest first, that counts its
// references.
type memCold struct {
	files []coldFile
	refs  *atomic.Int64
	buf   []byte
}

func newMemCold(refs *atomic.Int64, files ...coldFile) *memCold {
	refs.Add(1)
	return &memCold{files: files, refs: refs}
}

func (m *memCold) Get(bucket string, key []byte) ([]byte, bool, error) {
	for _, f := range m.files {
		i, ok := slices.BinarySearchFunc(f, coldEntry{bucket: bucket, key: string(key)}, compareColdEntry)
		if ok {
			if f[i].deleted {
				return nil, false, nil
			}
			m.buf = append(m.buf[:0], f[i].val...)
			return m.buf, true, nil
		}
	}
	return nil, false, nil
}

func (m *memCold) Scan(bucket string, from []byte, fn func(key, value []byte) bool) error {
	live := map[string][]byte{}
	seen := map[string]bool{}
	for _, f := range m.files {
		for _, e := range f {
			if e.bucket != bucket || e.key < string(from) || seen[e.key] {
				continue
			}
			seen[e.key] = true
			if !e.deleted {
				live[e.key] = e.val
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(live)) {
		if !fn([]byte(k), live[k]) {
			return nil
		}
	}
	return nil
}

func (m *memCold) Entries() int {
	n := 0
	for _, f := range m.files {
		n += len(f)
	}
	return n
}

func (m *memCold) Buckets() []string {
	set := map[string]bool{}
	for _, f := range m.files {
		for _, e := range f {
			set[e.bucket] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (m *memCold) MayHold(bucket string, key []byte) bool {
	for _, f := range m.files {
		if _, ok := slices.BinarySearchFunc(f, coldEntry{bucket: bucket, key: string(key)}, compareColdEntry); ok {
			return true
		}
	}
	return false
}

func (m *memCold) Retain()  { m.refs.Add(1) }
func (m *memCold) Release() { m.refs.Add(-1) }

func compareColdEntry(a, b coldEntry) int {
	if c := strings.Compare(a.bucket, b.bucket); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// readSnapshot collects a snapshot's entries as a file, checking their
// order.
func readSnapshot(t *testing.T, snap Snapshot) coldFile {
	t.Helper()
	var f coldFile
	err := snap.Entries(func(bucket, key, value []byte, deleted bool) error {
		e := coldEntry{bucket: string(bucket), key: string(key), val: bytes.Clone(value), deleted: deleted}
		if n := len(f); n > 0 && compareColdEntry(f[n-1], e) >= 0 {
			return fmt.Errorf("entry %q/%q after %q/%q", e.bucket, e.key, f[n-1].bucket, f[n-1].key)
		}
		f = append(f, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

type coldModel map[string]map[string]string // bucket → key → value

func (m coldModel) clone() coldModel {
	c := coldModel{}
	for b, kv := range m {
		c[b] = maps.Clone(kv)
	}
	return c
}

// apply applies a snapshot file to m (a full one replaces it).
func (m coldModel) apply(f coldFile, full bool) coldModel {
	if full {
		m = coldModel{}
	} else {
		m = m.clone()
	}
	for _, e := range f {
		if m[e.bucket] == nil {
			m[e.bucket] = map[string]string{}
		}
		if e.deleted {
			delete(m[e.bucket], e.key)
		} else {
			m[e.bucket][e.key] = string(e.val)
		}
	}
	return m
}

func (m coldModel) equal(o coldModel) bool {
	for b := range m {
		if !maps.Equal(m[b], o[b]) && (len(m[b]) > 0 || len(o[b]) > 0) {
			return false
		}
	}
	for b := range o {
		if m[b] == nil && len(o[b]) > 0 {
			return false
		}
	}
	return true
}

// TestBolt_ColdReadsMatchModel drives a Bolt with cold reads and a tiny
// cache (so entries are evicted, written back and covered all the time)
// with random writes, deletions, reads, scans, snapshots written as files
// and attached late or never (an aborted checkpoint), chains merged into
// a base and restores from them. Every read and scan matches a map model;
// every snapshot file, applied to the last complete state, is the model
// as of its barrier; and no working-file write happens for an entry the
// files already hold.
func TestBolt_ColdReadsMatchModel(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { coldModelRun(t, seed) })
	}
}

func coldModelRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	var refs atomic.Int64
	be, err := OpenBolt(filepath.Join(t.TempDir(), "state.db"), BoltOptions{
		ColdReads: true, CacheBytes: 2 << 10 * (1 + int(seed%4)), FlushBatch: 1 + int(seed%7)*10})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
		if n := refs.Load(); n != 0 {
			t.Fatalf("%d references to the checkpoint files left after Close", n)
		}
	}()
	buckets := []string{"a", "b"}
	var handles []Bucket
	for _, name := range buckets {
		h, err := be.Bucket(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	model := coldModel{"a": {}, "b": {}}
	key := func() string { return fmt.Sprintf("k%03d", rng.IntN(120)) }

	// The checkpoint side: the chain of files written, the state they hold
	// and the snapshot whose file waits to be attached.
	var chain []coldFile // newest first
	var chainState coldModel
	type pending struct {
		f    coldFile
		full bool
		seq  uint64
		want coldModel
	}
	var waits []*pending // written, not attached yet, oldest first
	attached := false
	needFull := true
	attach := func() {
		if len(waits) == 0 {
			return
		}
		wait := waits[0]
		waits = waits[1:]
		if wait.full {
			chain = []coldFile{wait.f}
		} else {
			chain = append([]coldFile{wait.f}, chain...)
		}
		chainState = wait.want
		if err := be.AttachCold(newMemCold(&refs, chain...), wait.seq); err != nil {
			t.Fatal(err)
		}
		attached = true
	}

	for step := range 3000 {
		b := rng.IntN(len(buckets))
		switch r := rng.IntN(100); {
		case r < 40:
			k, v := key(), fmt.Sprintf("v%d-%s", step, strings.Repeat("x", rng.IntN(40)))
			if err := be.Put(handles[b], []byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
			model[buckets[b]][k] = v
		case r < 55:
			k := key()
			if err := be.Delete(handles[b], []byte(k)); err != nil {
				t.Fatal(err)
			}
			delete(model[buckets[b]], k)
		case r < 85:
			k := key()
			v, ok, err := be.Get(handles[b], []byte(k))
			if err != nil {
				t.Fatal(err)
			}
			want, wok := model[buckets[b]][k]
			if ok != wok || string(v) != want {
				t.Fatalf("step %d: Get %s/%s = %q, %v; want %q, %v", step, buckets[b], k, v, ok, want, wok)
			}
		case r < 88:
			from := key()
			var got []string
			limit := 1 + rng.IntN(200)
			if err := be.Scan(handles[b], []byte(from), func(k, v []byte) bool {
				got = append(got, string(k)+"="+string(v))
				return len(got) < limit
			}); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, k := range slices.Sorted(maps.Keys(model[buckets[b]])) {
				if k >= from && len(want) < limit {
					want = append(want, k+"="+model[buckets[b]][k])
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Scan %s from %s\n got %v\nwant %v", step, buckets[b], from, got, want)
			}
		case r < 94:
			// A checkpoint barrier: the previous file, if still waiting,
			// is attached now, never (its write failed), or after this
			// snapshot is taken (an idle subtask takes the barrier
			// before it looks at its mailbox).
			if len(waits) > 0 {
				switch rng.IntN(4) {
				case 0:
					waits, needFull = nil, true
				case 1:
				default:
					attach()
				}
			}
			snap, err := be.Snapshot(needFull || rng.IntN(10) == 0)
			if err != nil {
				t.Fatal(err)
			}
			p := &pending{full: !snap.Incremental(), seq: be.Snapshots(), want: model.clone()}
			p.f = readSnapshot(t, snap)
			if err := snap.Close(); err != nil {
				t.Fatal(err)
			}
			filesState := chainState // once the files before it are attached
			for _, w := range waits {
				filesState = filesState.apply(w.f, w.full)
			}
			if got := filesState.apply(p.f, p.full); !got.equal(p.want) {
				t.Fatalf("step %d: snapshot (full %v) applied to the files' state is not the state at the barrier", step, p.full)
			}
			needFull = false
			waits = append(waits, p)
			if rng.IntN(2) == 0 {
				attach() // at once; otherwise later, after more writes
			}
		case r < 96:
			attach()
		case r < 98 && attached && len(chain) > 1:
			// The chain merged into one base: same state, fewer files.
			merged := coldFile{}
			for _, bk := range slices.Sorted(maps.Keys(chainState)) {
				for _, k := range slices.Sorted(maps.Keys(chainState[bk])) {
					merged = append(merged, coldEntry{bucket: bk, key: k, val: []byte(chainState[bk][k])})
				}
			}
			chain = []coldFile{merged}
			seq := be.coldSeq
			if err := be.AttachCold(newMemCold(&refs, chain...), seq); err != nil {
				t.Fatal(err)
			}
		case r < 100 && attached:
			// A restart: the state comes back as the files hold it.
			waits = nil
			if err := be.RestoreCold(newMemCold(&refs, chain...), RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			model = chainState.clone()
			for _, name := range buckets {
				if model[name] == nil {
					model[name] = map[string]string{}
				}
			}
			needFull = true
		}
	}
}

// TestBolt_ColdReadsWriteNothingTheFilesHold: with every update covered
// by an attached file before the cache needs room, the working file is
// never written, however small the cache; without cold reads the same
// updates are written back.
func TestBolt_ColdReadsWriteNothingTheFilesHold(t *testing.T) {
	for _, cold := range []bool{false, true} {
		t.Run(fmt.Sprintf("cold=%v", cold), func(t *testing.T) {
			var refs atomic.Int64
			be, err := OpenBolt(filepath.Join(t.TempDir(), "state.db"), BoltOptions{ColdReads: cold, CacheBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			b, _ := be.Bucket("w", nil)
			var chain []coldFile
			full := true
			for round := range 50 {
				for i := range 100 {
					k := fmt.Sprintf("key-%05d", (round*100+i)%4000)
					if err := be.Put(b, []byte(k), []byte(strings.Repeat("v", 60))); err != nil {
						t.Fatal(err)
					}
				}
				snap, err := be.Snapshot(full)
				if err != nil {
					t.Fatal(err)
				}
				f := readSnapshot(t, snap)
				snap.Close()
				if full {
					chain = nil
				}
				chain = append([]coldFile{f}, chain...)
				full = false
				if cold {
					if err := be.AttachCold(newMemCold(&refs, chain...), be.Snapshots()); err != nil {
						t.Fatal(err)
					}
				}
			}
			written := be.Usage().WrittenBytes
			if cold && written != 0 {
				t.Fatalf("cold reads wrote %d bytes to the working file", written)
			}
			if !cold && written == 0 {
				t.Fatal("without cold reads nothing was written back: the cache held everything, the test proves nothing")
			}
		})
	}
}
