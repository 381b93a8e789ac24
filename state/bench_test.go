package state

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func benchKey(dst []byte, i int) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], uint16(i%128))
	return fmt.Appendf(dst, "sensor-%07d\x00w", i)
}

// Hot set through the cache: Get then Put of the same-size value, the
// pattern of a window update. Target ≥ 5M ops/s/core; no allocation.
func BenchmarkBolt_HotGetUpdate(b *testing.B) {
	be := openTestBolt(b, BoltOptions{CacheBytes: 32 << 20})
	bk, _ := be.Bucket("op/windows", KeyGroupPrefix)
	const hot = 10_000
	keys := make([][]byte, hot)
	for i := range keys {
		keys[i] = benchKey(nil, i)
		be.Put(bk, keys[i], make([]byte, 24))
	}
	val := make([]byte, 24)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := keys[i%hot]
		i++
		v, _, err := be.Get(bk, k)
		if err != nil {
			b.Fatal(err)
		}
		copy(val, v)
		val[0]++
		if err := be.Put(bk, k, val); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
}

// Cold set: random gets of 200k keys through a 1 MiB cache (mostly bbolt
// reads).
func BenchmarkBolt_ColdGet(b *testing.B) {
	be := openTestBolt(b, BoltOptions{MaxSize: 256 << 20, CacheBytes: 1 << 20})
	bk, _ := be.Bucket("op/windows", KeyGroupPrefix)
	const n = 200_000
	var k []byte
	for i := range n {
		k = benchKey(k, i)
		be.Put(bk, k, make([]byte, 24))
	}
	be.Flush()
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		k = benchKey(k, r.IntN(n))
		if _, ok, err := be.Get(bk, k); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// Change-set capture at a barrier with 1% of 1M keys changed: Snapshot (the
// part that holds up processing: the copy of the cached changed entries,
// the swap of the change set, a read transaction) and then reading the 10k
// changed entries from the view (which the agent does beside processing).
// Nothing is flushed at the barrier. End to end with the file write:
// BenchmarkCheckpoint_OnePercentOfMillion in package checkpoint.
func BenchmarkBolt_SnapshotOnePercentOfMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1M-key store")
	}
	const n = 1_000_000
	be, bk := millionKeyStore(b, n)
	var k []byte
	val := make([]byte, 24)
	snap, _ := be.Snapshot(true) // the base
	snap.Close()
	r := rand.New(rand.NewPCG(3, 4))
	var worst, barrier time.Duration
	for b.Loop() {
		b.StopTimer()
		for range n / 100 {
			k = benchKey(k, r.IntN(n))
			val[0]++
			if err := be.Put(bk, k, val); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		snap, err := be.Snapshot(false)
		if err != nil {
			b.Fatal(err)
		}
		barrier = max(barrier, time.Since(t0))
		entries := 0
		if err := snap.Entries(func(_, _, _ []byte, _ bool) error { entries++; return nil }); err != nil {
			b.Fatal(err)
		}
		snap.Close()
		worst = max(worst, time.Since(t0))
		if !snap.Incremental() || entries < n/100-200 {
			b.Fatalf("incremental %v with %d entries", snap.Incremental(), entries)
		}
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
	b.ReportMetric(float64(barrier.Microseconds())/1000, "barrier-ms")
}

// millionKeyStore restores n window entries (24-byte values) into a fresh
// Bolt with an 8 MiB cache, as a restore from a checkpoint would.
func millionKeyStore(b *testing.B, n int) (*Bolt, Bucket) {
	be := openTestBolt(b, BoltOptions{MaxSize: 512 << 20, CacheBytes: 8 << 20})
	bk, _ := be.Bucket("op/windows", KeyGroupPrefix)
	var k []byte
	val := make([]byte, 24)
	if err := be.Restore(func(fn func(b, k, v []byte, del bool) error) error {
		// Sorted by key group, then key, as a checkpoint is.
		for kg := range 128 {
			for i := kg; i < n; i += 128 {
				k = benchKey(k, i)
				if err := fn([]byte("op/windows"), k, val, false); err != nil {
					return err
				}
			}
		}
		return nil
	}, RestoreOptions{}); err != nil {
		b.Fatal(err)
	}
	return be, bk
}

// Usage, as the agent samples it at every checkpoint barrier, after 1% of
// a 1M-key store was updated by Puts the cache had not looked up (the
// worst case: each dirty entry is looked up in the file, which the next
// Flush then need not do).
func BenchmarkBolt_UsageAfterOnePercentOfMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1M-key store")
	}
	const n = 1_000_000
	be, bk := millionKeyStore(b, n)
	r := rand.New(rand.NewPCG(3, 4))
	var k []byte
	val := make([]byte, 24)
	for b.Loop() {
		b.StopTimer()
		if err := be.Flush(); err != nil {
			b.Fatal(err)
		}
		for range n / 100 {
			k = benchKey(k, r.IntN(n))
			if err := be.Put(bk, k, val); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if u := be.Usage(); u.Keys != n || u.FileBytes == 0 {
			b.Fatalf("usage %+v", u)
		}
	}
}

// Restore of a full snapshot of 1M keys (one window entry and one timer
// each, as the window operator keeps: 2M entries, in (bucket, key) order as a
// checkpoint file yields them) into a fresh working file. Target: restore
// of 1M keys < 2 s end to end (BENCHMARKS.md); this is the bbolt rebuild part.
func BenchmarkBolt_RestoreMillion(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1M-key store")
	}
	const n = 1_000_000
	val := make([]byte, 60)
	entries := func(fn func(b, k, v []byte, del bool) error) error {
		var k []byte
		for kg := range 128 {
			for i := kg; i < n; i += 128 {
				k = benchKey(k, i)
				if err := fn([]byte("window/p/timers"), k, nil, false); err != nil {
					return err
				}
			}
		}
		for kg := range 128 {
			for i := kg; i < n; i += 128 {
				k = benchKey(k, i)
				if err := fn([]byte("window/p/windows"), k, val, false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	be := openTestBolt(b, BoltOptions{MaxSize: 1 << 30})
	for b.Loop() {
		if err := be.Restore(entries, RestoreOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/restore")
}

// One checkpoint of the edge workload with every key hot: 2,000 devices,
// a 10 s tumbling window each (a window entry and its timer), ten updates
// per key between checkpoints taken every second, and every tenth
// checkpoint the windows fire (deleted with their timers) and the next ones
// open; every tenth snapshot is full, as the agent's full_every default
// makes it. An iteration is the second's writes plus the checkpoint (the
// snapshot read through, as the checkpoint writer does, and closed): its
// B/op and allocs/op are what a checkpoint costs besides the readings'
// own. cache-bytes is what the write-back cache holds at the end.
func BenchmarkBolt_CheckpointAllocs(b *testing.B) {
	const devices = 2_000
	be := openTestBolt(b, BoltOptions{MaxSize: 64 << 20})
	wins, _ := be.Bucket("op/windows", KeyGroupPrefix)
	timers, _ := be.Bucket("op/timers", nil)
	names := make([][]byte, devices)
	for dev := range names {
		names[dev] = benchKey(nil, dev)
	}
	var k []byte
	val := make([]byte, 48)
	window := 0
	key := func(bk Bucket, dev, w int) []byte {
		if bk == timers {
			k = binary.BigEndian.AppendUint64(k[:0], uint64(w))
			k = append(k, names[dev]...)
		} else {
			k = binary.BigEndian.AppendUint64(append(k[:0], names[dev]...), uint64(w))
		}
		return k
	}
	second := func(cp int) {
		if cp%10 == 0 { // the windows fire, the next ones open
			for dev := range devices {
				for _, bk := range []Bucket{wins, timers} {
					if err := be.Delete(bk, key(bk, dev, window)); err != nil {
						b.Fatal(err)
					}
				}
				if err := be.Put(timers, key(timers, dev, window+1), nil); err != nil {
					b.Fatal(err)
				}
			}
			window++
		}
		for range 10 {
			for dev := range devices {
				val[0]++
				if err := be.Put(wins, key(wins, dev, window), val); err != nil {
					b.Fatal(err)
				}
			}
		}
		snap, err := be.Snapshot(cp%10 == 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Entries(func(_, _, _ []byte, _ bool) error { return nil }); err != nil {
			b.Fatal(err)
		}
		snap.Close()
	}
	cp := 0
	for ; cp < 30; cp++ { // three windows: the cache and buffers at their steady size
		second(cp)
	}
	b.ReportAllocs()
	for b.Loop() {
		second(cp)
		cp++
	}
	b.ReportMetric(float64(be.CacheBytes()), "cache-bytes")
}

// The working file's wear under scattered updates: 300k window-like
// entries (plus a timer each) in random key order through a 16 MiB cache,
// 1% of them, chosen at random, updated per checkpoint. It reports the
// bytes written to the file per update (Usage.WrittenBytes; an entry is
// 74 bytes) and the file's size: every write-back rewrites about every
// page of the windows' bucket, so both follow the write-backs' number and
// the file's compactness. Run with -benchtime 300x.
func BenchmarkBolt_WearScatteredOnePercent(b *testing.B) {
	const keys = 300_000
	be := openTestBolt(b, BoltOptions{CacheBytes: 16 << 20, MaxSize: 1 << 30})
	win, _ := be.Bucket("op/windows", KeyGroupPrefix)
	timers, _ := be.Bucket("op/timers", KeyGroupPrefix)
	key := func(dst []byte, i int) []byte {
		dst = binary.BigEndian.AppendUint16(dst[:0], uint16(uint32(i)*2654435761>>16)%128) // scattered key groups
		return fmt.Appendf(dst, "\x0esensor-%07d\x01window-%09d", i, 0)
	}
	val := make([]byte, 40)
	var k []byte
	for i := range keys {
		k = key(k, i)
		if err := be.Put(win, k, val); err != nil {
			b.Fatal(err)
		}
		if err := be.Put(timers, k, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Flush(); err != nil {
		b.Fatal(err)
	}
	written := be.Usage().WrittenBytes
	rng := rand.New(rand.NewPCG(1, 2))
	updates := 0
	b.ResetTimer()
	for b.Loop() {
		for range keys / 100 {
			binary.LittleEndian.PutUint64(val, rng.Uint64())
			if err := be.Put(win, key(k, rng.IntN(keys)), val); err != nil {
				b.Fatal(err)
			}
			updates++
		}
		snap, err := be.Snapshot(false)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Close(); err != nil {
			b.Fatal(err)
		}
	}
	u := be.Usage()
	b.ReportMetric(float64(u.WrittenBytes-written)/float64(updates), "written-B/update")
	b.ReportMetric(float64(u.FileBytes)/(1<<20), "file-MiB")
}
