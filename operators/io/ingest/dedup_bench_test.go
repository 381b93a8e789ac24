package ingest

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// benchReadings are n readings shaped like a sensor's (~100-byte payloads
// on 1,000 topics).
func benchReadings(n int) []Entry {
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = Entry{Arrival: int64(i), Topic: fmt.Appendf(nil, "sensors/dev-%04d/telemetry", i%1000),
			Payload: fmt.Appendf(bytes.Repeat([]byte{'x'}, 80), `{"ts":%d,"seq":%d}`, 1_764_410_400_000+i, i)}
	}
	return entries
}

// fillDedup indexes entries as the intake would, in batches of 768, at
// offsets from 1.
func fillDedup(d *Dedup, entries []Entry, o Origin) {
	off := uint64(1)
	for i := range entries {
		d.Observe(&entries[i], o)
		if (i+1)%768 == 0 || i == len(entries)-1 {
			n := uint64(len(d.staged))
			d.Appended(off, off+n-1)
			off += n
		}
	}
}

// BenchmarkDedupSteady is the filter's cost per reading on the steady
// stream, with the index at its default bound and the re-send rule on:
// hash, one store into the index, one into the connection's ring. It must
// not allocate.
func BenchmarkDedupSteady(b *testing.B) {
	d := NewDedup(DedupOptions{MaxInflight: 1000})
	defer d.Close()
	entries := benchReadings(DefaultIndexMax + 1<<16)
	o := Origin{Conn: 1}
	fillDedup(d, entries, o)
	// New readings from a small set, as a received batch is in the cache
	// (cycling through all of them would measure cache misses on the
	// benchmark's own payloads).
	fresh := entries[:4096]
	b.ReportAllocs()
	b.ResetTimer()
	off := uint64(len(entries) + 1)
	for i := range b.N {
		d.Observe(&fresh[i%len(fresh)], o)
		if len(d.staged) == 768 {
			d.Appended(off, off+767)
			off += 768
		}
	}
}

// BenchmarkDedupBurst is one DUP lookup of a redelivery burst against the
// full index (DefaultIndexMax entries, all blocks sorted by the burst's
// first lookup, which BenchmarkDedupBurstSort measures).
func BenchmarkDedupBurst(b *testing.B) {
	d := NewDedup(DedupOptions{MaxInflight: 1000})
	defer d.Close()
	entries := benchReadings(DefaultIndexMax)
	fillDedup(d, entries, Origin{Conn: 1})
	dups := make([]Entry, 4096) // a burst's batches are in the cache
	for i := range dups {
		dups[i] = entries[(i*7919)%len(entries)] // spread over the whole index
		dups[i].Flags = FlagDup
	}
	d.Observe(&dups[0], Origin{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if v := d.Observe(&dups[i%len(dups)], Origin{Conn: 2}); v != DropRedelivery {
			b.Fatalf("lookup %d: %v", i, v)
		}
	}
}

// BenchmarkDedupBurstSort is the one-time cost of a burst's first lookup:
// sorting every block of a full index (DefaultIndexMax entries).
func BenchmarkDedupBurstSort(b *testing.B) {
	x := hashIndex{max: DefaultIndexMax}
	defer x.reset()
	h := uint64(1)
	fill := func() {
		x.reset()
		for i := range DefaultIndexMax {
			h ^= h << 13
			h ^= h >> 7
			h ^= h << 17
			x.add(h, uint64(i+1))
		}
	}
	for range b.N {
		b.StopTimer()
		fill()
		b.StartTimer()
		x.contains(0)
	}
}

// BenchmarkDedupLoad is the cost of rebuilding the index from the log at
// Open: DefaultIndexMax readings, S2-compressed as the agent writes them.
func BenchmarkDedupLoad(b *testing.B) {
	l := mustOpen(b, b.TempDir(), Options{Compression: CompressS2, Ack: AfterWrite, SyncInterval: -1})
	defer l.Close()
	entries := benchReadings(DefaultIndexMax)
	for at := 0; at < len(entries); at += 768 {
		if _, _, err := l.Append(entries[at:min(at+768, len(entries))]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		d := NewDedup(DedupOptions{MaxInflight: 1000})
		if err := d.Load(l); err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(entries)), "ns/entry")
}

// BenchmarkDedupMemory measures the index's memory per million entries:
// resident set (VmRSS, Linux) and Go heap growth while a million entries
// are added.
func BenchmarkDedupMemory(b *testing.B) {
	const n = 1 << 20
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rss0 := vmRSS()
		x := hashIndex{max: n}
		for i := range n {
			x.add(uint64(i)*0x9e3779b97f4a7c15, uint64(i+1))
		}
		rss1 := vmRSS()
		runtime.ReadMemStats(&after)
		x.reset()
		b.ReportMetric(float64(rss1-rss0)/n*1e6/(1<<20), "MiB-RSS/1M-entries")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n*1e6/(1<<20), "MiB-heap/1M-entries")
	}
}

// vmRSS is this process's resident set in bytes (0 where /proc is absent).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
