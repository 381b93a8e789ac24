package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// memTableFile is a snapshot file in memory that counts its closes.
type memTableFile struct {
	*bytes.Reader
	closes int
}

func (f *memTableFile) Close() error { f.closes++; return nil }

// writeTableFile writes entries (in the order given) as a snapshot file and
// returns its bytes and the index the Writer collected.
func writeTableFile(t testing.TB, kind Kind, id uint64, entries []testEntry) ([]byte, *TableIndex, error) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, kind, id)
	if err := w.CollectIndex(); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := w.Add([]byte(e.bucket), []byte(e.key), []byte(e.value), e.deleted); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err := w.Index()
	return buf.Bytes(), ix, err
}

// tableModel is the state a chain of files amounts to, and each file's
// entries.
type tableModel struct {
	files [][]testEntry                // oldest first, each sorted
	state map[string]map[string]string // bucket → key → value, live entries only
	keys  map[string][]string          // bucket → every key used (and some never used), sorted
}

var tableBuckets = []string{"", "w", "w/1", "w/10", "win\x00dow", "x"}

// randKey returns a key over a tiny alphabet, so keys share prefixes (and
// the empty key occurs).
func randKey(rng *rand.Rand, maxLen int) string {
	const alphabet = "\x00ab\xff"
	n := rng.IntN(maxLen + 1)
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func randValue(rng *rand.Rand, maxLen int, compressible bool) string {
	n := rng.IntN(maxLen + 1)
	b := make([]byte, n)
	for i := range b {
		if compressible {
			b[i] = "acc0123"[rng.IntN(7)]
		} else {
			b[i] = byte(rng.Uint32())
		}
	}
	return string(b)
}

// newTableModel makes a base of baseN entries and increments of incN
// entries each (puts and deletions of random keys) over keyLen-byte keys.
func newTableModel(rng *rand.Rand, increments, baseN, incN, keyLen, valueLen int, compressible bool) *tableModel {
	m := &tableModel{state: map[string]map[string]string{}, keys: map[string][]string{}}
	for _, b := range tableBuckets {
		m.state[b] = map[string]string{}
	}
	for f := 0; f <= increments; f++ {
		n := baseN
		if f > 0 {
			n = incN
		}
		seen := map[[2]string]bool{}
		var es []testEntry
		for range n {
			b, k := tableBuckets[rng.IntN(len(tableBuckets))], randKey(rng, keyLen)
			if seen[[2]string{b, k}] {
				continue
			}
			seen[[2]string{b, k}] = true
			e := testEntry{bucket: b, key: k}
			if f > 0 && rng.IntN(4) == 0 {
				e.deleted = true
				delete(m.state[b], k)
			} else {
				e.value = randValue(rng, valueLen, compressible)
				m.state[b][k] = e.value
			}
			es = append(es, e)
		}
		slices.SortFunc(es, func(a, b testEntry) int {
			return compareKeys([]byte(a.bucket), []byte(a.key), []byte(b.bucket), []byte(b.key))
		})
		m.files = append(m.files, es)
	}
	for _, b := range tableBuckets {
		set := map[string]bool{}
		for _, f := range m.files {
			for _, e := range f {
				if e.bucket == b {
					set[e.key] = true
				}
			}
		}
		for range 50 {
			set[randKey(rng, keyLen+1)] = true // mostly absent
		}
		for k := range set {
			m.keys[b] = append(m.keys[b], k)
		}
		slices.Sort(m.keys[b])
	}
	return m
}

// tables writes the model's files and opens them as Tables, newest first,
// with the Writer's index or with OpenTable.
func (m *tableModel) tables(t *testing.T, openTable bool) []*Table {
	t.Helper()
	var ts []*Table
	for i, es := range m.files {
		kind := KindIncremental
		if i == 0 {
			kind = KindFull
		}
		b, ix, err := writeTableFile(t, kind, uint64(i+1), es)
		if err != nil {
			t.Fatal(err)
		}
		f := &memTableFile{Reader: bytes.NewReader(b)}
		tb := NewTable(f, ix)
		if openTable {
			if tb, err = OpenTable(f); err != nil {
				t.Fatal(err)
			}
		}
		ts = append([]*Table{tb}, ts...)
	}
	return ts
}

func TestChainMatchesModel(t *testing.T) {
	cases := []struct {
		name                    string
		increments, baseN, incN int
		keyLen, valueLen        int
		compressible            bool
	}{
		{"base only", 0, 300, 0, 4, 20, true},
		{"base and increments", 6, 400, 60, 5, 30, true},
		{"many blocks compressed", 3, 6000, 800, 8, 60, true},
		{"many blocks plain", 3, 3000, 500, 8, 120, false},
		{"empty values", 4, 200, 50, 3, 0, true},
		{"empty increments", 3, 100, 0, 3, 10, true},
	}
	for _, tc := range cases {
		for _, openTable := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/opentable=%v", tc.name, openTable), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
				m := newTableModel(rng, tc.increments, tc.baseN, tc.incN, tc.keyLen, tc.valueLen, tc.compressible)
				c := NewChain(m.tables(t, openTable)...)
				defer c.Release()
				m.check(t, c, rng)
			})
		}
	}
}

// check compares c's Gets and Scans, and its tables', with the model.
func (m *tableModel) check(t *testing.T, c *Chain, rng *rand.Rand) {
	t.Helper()
	m.checkState(t, c, rng)
	m.checkFiles(t, c)
}

// checkState compares c's Gets and Scans with the model's state.
func (m *tableModel) checkState(t *testing.T, c *Chain, rng *rand.Rand) {
	t.Helper()
	for _, b := range tableBuckets {
		for _, k := range m.keys[b] {
			want, wantOK := m.state[b][k]
			got, ok, err := c.Get(b, []byte(k))
			if err != nil || ok != wantOK || string(got) != want {
				t.Fatalf("Get(%q, %q) = %q, %v, %v; want %q, %v", b, k, got, ok, err, want, wantOK)
			}
		}
		// Scans from nil, from every 7th key, and one that stops early.
		froms := []string{""}
		for i := 0; i < len(m.keys[b]); i += 7 {
			froms = append(froms, m.keys[b][i])
		}
		for _, from := range froms {
			var want []string
			for _, k := range m.keys[b] {
				if v, ok := m.state[b][k]; ok && k >= from {
					want = append(want, k+"="+v)
				}
			}
			var got []string
			err := c.Scan(b, []byte(from), func(k, v []byte) bool {
				got = append(got, string(k)+"="+string(v))
				return true
			})
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("Scan(%q, %q) = %d entries, %v; want %d\n got %q\nwant %q", b, from, len(got), err, len(want), got, want)
			}
			limit := rng.IntN(len(want) + 1)
			got = got[:0]
			err = c.Scan(b, []byte(from), func(k, v []byte) bool {
				got = append(got, string(k)+"="+string(v))
				return len(got) < limit
			})
			if limit == 0 && len(want) > 0 {
				limit = 1 // fn is called once before it can say stop
			}
			if err != nil || !slices.Equal(got, want[:min(limit, len(want))]) {
				t.Fatalf("Scan(%q, %q) stopping after %d = %q, %v", b, from, limit, got, err)
			}
		}
	}
}

// checkFiles compares c's tables with the model's files.
func (m *tableModel) checkFiles(t *testing.T, c *Chain) {
	t.Helper()
	tables := c.Tables()
	for i, es := range m.files {
		tb := tables[len(tables)-1-i]
		if tb.Entries() != uint64(len(es)) {
			t.Fatalf("file %d: Entries() = %d, want %d", i, tb.Entries(), len(es))
		}
		for _, e := range es {
			v, deleted, found, err := tb.Get(e.bucket, []byte(e.key))
			if err != nil || !found || deleted != e.deleted || string(v) != e.value {
				t.Fatalf("file %d: Get(%q, %q) = %q, %v, %v, %v; want %+v", i, e.bucket, e.key, v, deleted, found, err, e)
			}
		}
		for _, b := range tableBuckets {
			var want, got []testEntry
			for _, e := range es {
				if e.bucket == b {
					want = append(want, e)
				}
			}
			err := tb.Scan(b, nil, func(k, v []byte, deleted bool) bool {
				got = append(got, testEntry{b, string(k), string(v), deleted})
				return true
			})
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("file %d: Scan(%q) = %v, %v; want %v", i, b, got, err, want)
			}
		}
	}
}

// TestIndexPathsAgree checks that the index a Writer collects is the one
// OpenTable builds from the file.
func TestIndexPathsAgree(t *testing.T) {
	for _, n := range []int{0, 1, 500, 20000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			m := newTableModel(rng, 0, n, 0, 10, 50, n%2 == 0)
			b, written, err := writeTableFile(t, KindFull, 9, m.files[0])
			if err != nil {
				t.Fatal(err)
			}
			tb, err := OpenTable(&memTableFile{Reader: bytes.NewReader(b)})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(written, tb.ix) {
				t.Fatalf("indexes differ:\nwriter    %+v\nOpenTable %+v", written, tb.ix)
			}
			if written.Size() != int64(len(b)) || written.Entries() != uint64(len(m.files[0])) {
				t.Fatalf("Size, Entries = %d, %d; want %d, %d", written.Size(), written.Entries(), len(b), len(m.files[0]))
			}
			if h := written.Header(); h.Kind != KindFull || h.CheckpointID != 9 || h.Version != SnapshotVersion {
				t.Fatalf("Header() = %+v", h)
			}
		})
	}
}

func TestTableUnordered(t *testing.T) {
	cases := []struct {
		name    string
		entries []testEntry
	}{
		{"keys descending", []testEntry{{bucket: "b", key: "2"}, {bucket: "b", key: "1"}}},
		{"duplicate key", []testEntry{{bucket: "b", key: "1"}, {bucket: "b", key: "1", deleted: true}}},
		{"buckets descending", []testEntry{{bucket: "c", key: "1"}, {bucket: "b", key: "2"}}},
		{"prefix after longer", []testEntry{{bucket: "b", key: "ab"}, {bucket: "b", key: "a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, ix, err := writeTableFile(t, KindFull, 1, tc.entries)
			if !errors.Is(err, ErrUnordered) || ix != nil {
				t.Fatalf("Writer.Index() = %v, %v; want ErrUnordered", ix, err)
			}
			if _, err := OpenTable(&memTableFile{Reader: bytes.NewReader(b)}); !errors.Is(err, ErrUnordered) || IsCorruption(err) {
				t.Fatalf("OpenTable() error = %v; want ErrUnordered", err)
			}
			if _, _, err := VerifySnapshot(bytes.NewReader(b)); err != nil {
				t.Fatalf("the file itself is valid: %v", err)
			}
		})
	}
}

func TestTableCorruptBlock(t *testing.T) {
	for _, compressible := range []bool{true, false} {
		t.Run(fmt.Sprintf("compressed=%v", compressible), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 3))
			m := newTableModel(rng, 0, 4000, 0, 8, 80, compressible)
			es := m.files[0]
			b, ix, err := writeTableFile(t, KindFull, 1, es)
			if err != nil {
				t.Fatal(err)
			}
			if len(ix.blocks) < 3 {
				t.Fatalf("%d blocks; want several", len(ix.blocks))
			}
			const bad = 1
			bb, bk := ix.firstKey(bad)
			b[ix.blocks[bad].off+int64(ix.blocks[bad].size)/2] ^= 0x10
			if _, err := OpenTable(&memTableFile{Reader: bytes.NewReader(b)}); !IsCorruption(err) {
				t.Fatalf("OpenTable() error = %v; want ErrCorrupt", err)
			}
			tb := NewTable(&memTableFile{Reader: bytes.NewReader(b)}, ix)
			if _, _, _, err := tb.Get(string(bb), bk); !IsCorruption(err) {
				t.Fatalf("Get of a key in the damaged block: error %v; want ErrCorrupt", err)
			}
			gb, gk := ix.firstKey(bad + 1)
			if _, _, found, err := tb.Get(string(gb), gk); err != nil || !found {
				t.Fatalf("Get of a key in an intact block = %v, %v", found, err)
			}
			if err := tb.Scan(string(bb), nil, func([]byte, []byte, bool) bool { return true }); !IsCorruption(err) {
				t.Fatalf("Scan over the damaged block: error %v; want ErrCorrupt", err)
			}
			c := NewChain(tb)
			defer c.Release()
			if _, _, err := c.Get(string(bb), bk); !IsCorruption(err) {
				t.Fatalf("Chain.Get of a key in the damaged block: error %v; want ErrCorrupt", err)
			}
		})
	}
}

// TestBloomFalsePositives checks that a filter answering "maybe" to every
// key changes no result, and that the real filter's false positive rate is
// near its design.
func TestBloomFalsePositives(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	m := newTableModel(rng, 4, 2000, 300, 6, 20, true)
	tables := m.tables(t, false)
	for _, tb := range tables {
		ix := *tb.ix
		for i := range ix.filter.words {
			ix.filter.words[i] = ^uint64(0)
		}
		tb.ix = &ix
	}
	c := NewChain(tables...)
	defer c.Release()
	m.check(t, c, rng)

	hashes := make([]uint64, 100000)
	for i := range hashes {
		hashes[i] = keyHash("w", fmt.Appendf(nil, "present-%d", i))
	}
	f := newBloom(hashes)
	for _, h := range hashes {
		if !f.mayContain(h) {
			t.Fatal("the filter lost a key")
		}
	}
	fp := 0
	const probes = 100000
	for i := range probes {
		if f.mayContain(keyHash("w", fmt.Appendf(nil, "absent-%d", i))) {
			fp++
		}
	}
	rate := float64(fp) / probes
	if rate > 0.02 {
		t.Fatalf("false positive rate %.4f; want about 0.01", rate)
	}
	t.Logf("false positive rate %.4f at %d bits per key", rate, bloomBitsPerKey)
}

func TestTableRetainRelease(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	m := newTableModel(rng, 2, 100, 20, 4, 10, true)
	open := func() ([]*Table, []*memTableFile) {
		ts := m.tables(t, false)
		fs := make([]*memTableFile, len(ts))
		for i, tb := range ts {
			fs[i] = tb.f.(*memTableFile)
		}
		return ts, fs
	}
	closes := func(fs []*memTableFile) []int {
		var n []int
		for _, f := range fs {
			n = append(n, f.closes)
		}
		return n
	}
	cases := []struct {
		name string
		run  func(ts []*Table) (live []func(), last func())
		// closes after the live releases, newest file first
		early []int
	}{
		{"table retained twice", func(ts []*Table) ([]func(), func()) {
			tb := ts[0]
			tb.Retain()
			tb.Retain()
			for _, o := range ts[1:] {
				o.Release()
			}
			return []func(){tb.Release, tb.Release}, tb.Release
		}, []int{0, 1, 1}},
		{"chain retained", func(ts []*Table) ([]func(), func()) {
			c := NewChain(ts...)
			c.Retain()
			return []func(){c.Release}, c.Release
		}, []int{0, 0, 0}},
		{"chains share tables", func(ts []*Table) ([]func(), func()) {
			old := NewChain(ts[1:]...)
			c := old.With(ts[0])
			older := NewChain()
			return []func(){old.Release, older.Release}, c.Release
		}, []int{0, 0, 0}},
		{"rebase keeps the newer", func(ts []*Table) ([]func(), func()) {
			c := NewChain(ts...)
			base := ts[1]
			base.Retain() // a merged base stands in for the older files
			r := c.Rebase(base)
			if got := r.Tables(); len(got) != 2 || got[0] != ts[0] || got[1] != base {
				t.Fatalf("Rebase kept %v", got)
			}
			return []func(){c.Release}, r.Release
		}, []int{0, 0, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts, fs := open()
			live, last := tc.run(ts)
			for _, release := range live {
				release()
			}
			if n := closes(fs); !slices.Equal(n, tc.early) {
				t.Fatalf("closes before the last release = %v; want %v", n, tc.early)
			}
			last()
			if n := closes(fs); slices.ContainsFunc(n, func(c int) bool { return c != 1 }) {
				t.Fatalf("closes = %v; want each once", n)
			}
		})
	}
	t.Run("over-release panics", func(t *testing.T) {
		ts, _ := open()
		c := NewChain(ts...)
		c.Release()
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		c.Release()
	})
}

// TestStoreTableOutlivesRemoval opens Tables of files in a Store on the
// real file system, removes the files, and reads on.
func TestStoreTableOutlivesRemoval(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	m := newTableModel(rng, 2, 3000, 400, 8, 40, true)
	refs, written := writeModelFiles(t, s, m.files)
	// One file through OpenTable, with its ref checked.
	written[1].Release()
	if written[1], err = s.OpenTable(refs[1]); err != nil {
		t.Fatal(err)
	}
	bad := refs[1]
	bad.SHA256 = strings.Repeat("0", 64)
	if _, err := s.OpenTable(bad); !IsCorruption(err) {
		t.Fatalf("OpenTable of a ref with another SHA-256: %v; want ErrCorrupt", err)
	}
	var tables []*Table // newest first
	for _, tb := range written {
		tables = append([]*Table{tb}, tables...)
	}
	c := NewChain(tables...)
	defer c.Release()
	names, err := filepath.Glob(filepath.Join(dir, "files", "*.snap"))
	if err != nil || len(names) != len(m.files) {
		t.Fatalf("files %v, %v", names, err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	m.check(t, c, rng)
}

func TestWriterIndexMisuse(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, KindFull, 1)
	if _, err := w.Index(); err == nil {
		t.Fatal("Index without CollectIndex succeeded")
	}
	if err := w.Put([]byte("b"), []byte("k"), nil); err != nil {
		t.Fatal(err)
	}
	if err := w.CollectIndex(); err == nil {
		t.Fatal("CollectIndex after an entry succeeded")
	}
	w.Reset(&buf, KindFull, 2)
	if err := w.CollectIndex(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Index(); err == nil {
		t.Fatal("Index before Close succeeded")
	}
}

// writeModelFiles writes the model's files into s, oldest first, as
// Tables collected while writing.
func writeModelFiles(t *testing.T, s *Store, files [][]testEntry) ([]FileRef, []*Table) {
	t.Helper()
	var refs []FileRef
	var tables []*Table
	for i, es := range files {
		kind := KindIncremental
		if i == 0 {
			kind = KindFull
		}
		ref, tb, err := s.WriteSnapshotTable("t", "p", kind, uint64(i+1), func(fn func(b, k, v []byte, d bool) error) error {
			for _, e := range es {
				if err := fn([]byte(e.bucket), []byte(e.key), []byte(e.value), e.deleted); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		refs, tables = append(refs, ref), append(tables, tb)
	}
	return refs, tables
}

// TestChainRebaseOnMerge starts a chain over from a merge of its files
// while an increment newer than the merge has been added.
func TestChainRebaseOnMerge(t *testing.T) {
	s, err := OpenStore(vfs.NewCrashableMem(), "store")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(10, 10))
	m := newTableModel(rng, 5, 2000, 300, 6, 30, true)
	refs, tables := writeModelFiles(t, s, m.files)
	c := NewChain()
	for _, tb := range tables[:len(tables)-1] {
		next := c.With(tb)
		c.Release()
		c = next
	}
	mergedRef, merged, err := s.MergeChainTable(context.Background(), refs[:len(refs)-1], uint64(len(refs)-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyFile(mergedRef); err != nil {
		t.Fatal(err)
	}
	withNewest := c.With(tables[len(tables)-1])
	c.Release()
	rebased := withNewest.Rebase(merged)
	withNewest.Release()
	defer rebased.Release()
	if got := rebased.Tables(); len(got) != 2 || got[0] != tables[len(tables)-1] || got[1] != merged {
		t.Fatalf("rebased chain holds %v", got)
	}
	m.files = nil // the files changed; only the state is compared
	m.checkState(t, rebased, rng)
}

// TestChainConcurrentReaders reads one set of tables from several
// goroutines: a Chain each for Get, and Scans of a shared Chain.
func TestChainConcurrentReaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	m := newTableModel(rng, 3, 2000, 300, 6, 30, true)
	shared := NewChain(m.tables(t, false)...)
	defer shared.Release()
	var wg sync.WaitGroup
	for g := range 4 {
		c := shared
		if g%2 == 0 {
			for _, tb := range shared.Tables() {
				tb.Retain()
			}
			c = NewChain(shared.Tables()...)
		} else {
			c.Retain()
		}
		wg.Go(func() {
			defer c.Release()
			for _, b := range tableBuckets {
				for _, k := range m.keys[b] {
					want, wantOK := m.state[b][k]
					var v []byte
					var ok bool
					var err error
					if g%2 == 0 {
						v, ok, err = c.Get(b, []byte(k))
					} else {
						err = c.Scan(b, []byte(k), func(key, value []byte) bool {
							ok = string(key) == k
							v = append(v[:0], value...)
							return false
						})
					}
					if err != nil || ok != wantOK || (ok && string(v) != want) {
						t.Errorf("goroutine %d: %q/%q = %q, %v, %v; want %q, %v", g, b, k, v, ok, err, want, wantOK)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// coldReader is the interface state reads cold keys through; a Chain must
// implement it exactly.
type coldReader interface {
	Get(bucket string, key []byte) (value []byte, ok bool, err error)
	Scan(bucket string, from []byte, fn func(key, value []byte) bool) error
	Entries() int
	Release()
	Retain()
}

var _ coldReader = (*Chain)(nil)

// TestTableTruncatedUnderIt reads a file cut short after it was indexed.
func TestTableTruncatedUnderIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	m := newTableModel(rng, 0, 3000, 0, 8, 60, true)
	b, ix, err := writeTableFile(t, KindFull, 1, m.files[0])
	if err != nil {
		t.Fatal(err)
	}
	last := len(ix.blocks) - 1
	tb := NewTable(&memTableFile{Reader: bytes.NewReader(b[:ix.blocks[last].off+10])}, ix)
	defer tb.Release()
	lb, lk := ix.firstKey(last)
	if _, _, _, err := tb.Get(string(lb), lk); !IsCorruption(err) {
		t.Fatalf("Get in the cut block: error %v; want ErrCorrupt", err)
	}
	fb, fk := ix.firstKey(0)
	if _, _, found, err := tb.Get(string(fb), fk); err != nil || !found {
		t.Fatalf("Get in an intact block = %v, %v", found, err)
	}
}

// FuzzOpenTable feeds arbitrary bytes to OpenTable: it must never panic,
// and a file it accepts must answer Get and Scan for each of its entries.
func FuzzOpenTable(f *testing.F) {
	for _, es := range [][]testEntry{nil, manyEntries(40), {{"b", "", "", false}, {"b", "k", "", true}}} {
		b, _, err := writeTableFile(f, KindFull, 1, es)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := OpenTable(&memTableFile{Reader: bytes.NewReader(b)})
		if err != nil {
			return
		}
		defer tb.Release()
		_, es, err := readSnapshot(t, b)
		if err != nil {
			t.Fatalf("OpenTable accepted a file the Reader refuses: %v", err)
		}
		for _, e := range es {
			v, deleted, found, err := tb.Get(e.bucket, []byte(e.key))
			if err != nil || !found || deleted != e.deleted || string(v) != e.value {
				t.Fatalf("Get(%q, %q) = %q, %v, %v, %v; want %+v", e.bucket, e.key, v, deleted, found, err, e)
			}
			n := 0
			if err := tb.Scan(e.bucket, []byte(e.key), func(k, v []byte, d bool) bool {
				n++
				if string(k) != e.key || string(v) != e.value || d != e.deleted {
					t.Fatalf("Scan from %q/%q starts at %q", e.bucket, e.key, k)
				}
				return false
			}); err != nil || n != 1 {
				t.Fatalf("Scan from %q/%q: %d entries, %v", e.bucket, e.key, n, err)
			}
		}
	})
}
