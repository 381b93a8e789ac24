package checkpoint

import (
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// windowKey appends the key of sensor i's window as state lays it out:
// 2-byte key group | uvarint length | "sim-%07d" | 17-byte namespace (the
// window).
func windowKey(dst []byte, i int) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(i%128))
	dst = append(dst, 11)
	dst = append(dst, "sim-0000000"...)
	for j, v := len(dst)-1, i; v > 0; j, v = j-1, v/10 {
		dst[j] = byte('0' + v%10)
	}
	dst = append(dst, 1)
	dst = binary.BigEndian.AppendUint64(dst, 1_760_000_000_000)
	return binary.BigEndian.AppendUint64(dst, 1_760_000_060_000)
}

// windowValue appends about 40 bytes of accumulators.
func windowValue(dst []byte, i, version int) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], uint64(10+version))
	for _, f := range []float64{float64(i) * 0.5, 20 + float64(i%37), 18.25, 23.5} {
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(f))
	}
	return dst
}

// BenchmarkColdChain measures reads from a chain of one base of 1M window
// entries and 100 increments of 10k entries each (random keys of the base,
// 1% of them deleted), files written through a Store on the real file
// system (so each block read is a pread from the page cache).
//
//	go test -run '^$' -bench ColdChain -benchmem ./checkpoint/
func BenchmarkColdChain(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a 1M-entry base")
	}
	const (
		n          = 1_000_000
		increments = 100
		incN       = 10_000
		bucket     = "window/temp_1m/acc"
	)
	s, err := OpenStore(nil, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	// Keys in file order: by key group, then by sensor.
	order := func(x, y int) int {
		if c := x%128 - y%128; c != 0 {
			return c
		}
		return x - y
	}
	var k, v []byte
	write := func(kind Kind, id uint64, ids []int, version int) (FileRef, *Table) {
		ref, t, err := s.WriteSnapshotTable("t", "p", kind, id, func(fn func(b, k, v []byte, d bool) error) error {
			for j, i := range ids {
				k, v = windowKey(k, i), windowValue(v, i, version)
				if err := fn([]byte(bucket), k, v, kind == KindIncremental && j%100 == 7); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return ref, t
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	slices.SortFunc(all, order)
	baseRef, base := write(KindFull, 1, all, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	tables := []*Table{base}
	for f := range increments {
		ids := make([]int, 0, incN)
		seen := map[int]bool{}
		for len(ids) < incN {
			if i := rng.IntN(n); !seen[i] {
				seen[i] = true
				ids = append(ids, i)
			}
		}
		slices.SortFunc(ids, order)
		_, t := write(KindIncremental, uint64(f+2), ids, f+1)
		tables = append([]*Table{t}, tables...)
	}
	base.Retain()
	baseOnly := NewChain(base)
	defer baseOnly.Release()
	chain := NewChain(tables...)
	defer chain.Release()

	get := func(c *Chain, absent bool) func(b *testing.B) {
		return func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			var key []byte
			found := 0
			b.ReportAllocs()
			for b.Loop() {
				i := rng.IntN(n)
				if absent {
					i += n
				}
				key = windowKey(key, i)
				_, ok, err := c.Get(bucket, key)
				if err != nil {
					b.Fatal(err)
				}
				if ok {
					found++
				}
			}
			if absent && found > 0 {
				b.Fatalf("%d absent keys found", found)
			}
			b.ReportMetric(float64(c.IndexBytes())/float64(c.Entries()), "index-B/entry")
		}
	}
	b.Run("base/present", get(baseOnly, false))
	b.Run("base/absent", get(baseOnly, true))
	b.Run("chain101/present", get(chain, false))
	b.Run("chain101/absent", get(chain, true))
	clustered := func(c *Chain) func(b *testing.B) {
		return func(b *testing.B) {
			// Consecutive keys of one key group: runs of misses in one block.
			var key []byte
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key = windowKey(key, i)
				if _, _, err := c.Get(bucket, key); err != nil {
					b.Fatal(err)
				}
				if i += 128; i >= n {
					i = i%128 + 1
				}
			}
		}
	}
	b.Run("base/clustered", clustered(baseOnly))
	b.Run("chain101/clustered", clustered(chain))
	b.Run("chain101/scan1000", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(5, 6))
		var from []byte
		b.ReportAllocs()
		for b.Loop() {
			from = windowKey(from, rng.IntN(n))
			left := 1000
			if err := chain.Scan(bucket, from, func(k, v []byte) bool { left--; return left > 0 }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("OpenTable/base", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, err := s.OpenTable(baseRef)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(baseRef.Size)/(1<<20), "file-MiB")
			b.ReportMetric(float64(t.IndexBytes())/(1<<20), "index-MiB")
			t.Release()
		}
	})
}

// BenchmarkWriterCollectIndex is BenchmarkWriter collecting the index (the
// write of a file a Table is made of); compare the two for its cost.
func BenchmarkWriterCollectIndex(b *testing.B) {
	const n = 1_000_000
	bucket, value := []byte("window/temp_1m"), []byte("0123456789abcdef")
	key := []byte("device-000000|0000")
	b.SetBytes(int64(n * (len(bucket) + len(key) + len(value))))
	b.ReportAllocs()
	w := NewWriter(io.Discard, KindFull, 1)
	for b.Loop() {
		w.Reset(io.Discard, KindFull, 1)
		if err := w.CollectIndex(); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			key[12], key[11], key[10] = byte('0'+i%10), byte('0'+i/10%10), byte('0'+i/100%10)
			key[9], key[8], key[7] = byte('0'+i/1000%10), byte('0'+i/10000%10), byte('0'+i/100000%10)
			if err := w.Put(bucket, key, value); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Index(); err != nil {
			b.Fatal(err)
		}
	}
}
