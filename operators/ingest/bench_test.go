package ingest

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkAppend measures Append of 100-byte payloads in batches of 1, 64
// and 512 per ack mode on this machine's disk (the benchmark's temporary
// directory, TMPDIR). msgs/s and MB/s count frames; allocs/entry must be 0.
func BenchmarkAppend(b *testing.B) {
	for _, ack := range []AckMode{AfterFsync, AfterWrite} {
		for _, n := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("%s/batch=%d", ack, n), func(b *testing.B) {
				l := mustOpen(b, b.TempDir(), Options{Ack: ack})
				defer l.Close()
				batch := make([]Entry, n)
				for i := range batch {
					batch[i] = Entry{
						Arrival: 1_700_000_000_000,
						Topic:   []byte("sensors/dev-0001/telemetry"),
						Payload: bytes.Repeat([]byte{'x'}, 100),
					}
				}
				b.SetBytes(int64(n * frameLen(&batch[0])))
				b.ReportAllocs()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				mallocs := ms.Mallocs
				start := time.Now()
				b.ResetTimer()
				for range b.N {
					if _, _, err := l.Append(batch); err != nil {
						b.Fatal(err)
					}
					if l.SizeBytes() > 256<<20 {
						b.StopTimer()
						if err := l.Truncate(l.LastOffset()); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				}
				b.StopTimer()
				elapsed := time.Since(start)
				runtime.ReadMemStats(&ms)
				entries := float64(b.N * n)
				b.ReportMetric(entries/elapsed.Seconds(), "msgs/s")
				b.ReportMetric(float64(ms.Mallocs-mallocs)/entries, "allocs/entry")
			})
		}
	}
}

// BenchmarkReader measures replay: Next over 100-byte payloads.
func BenchmarkReader(b *testing.B) {
	l := mustOpen(b, b.TempDir(), Options{Ack: AfterWrite, SyncInterval: -1})
	defer l.Close()
	batch := make([]Entry, 512)
	for i := range batch {
		batch[i] = Entry{Topic: []byte("sensors/dev-0001/telemetry"), Payload: bytes.Repeat([]byte{'x'}, 100)}
	}
	for range 200 {
		if _, _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	r, err := l.Reader(0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.SetBytes(int64(frameLen(&batch[0])))
	b.ReportAllocs()
	for range b.N {
		if _, err := r.Next(); err != nil {
			r.Close()
			if r, err = l.Reader(0); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDedupObserve measures the redelivery filter per message.
func BenchmarkDedupObserve(b *testing.B) {
	d := NewDedup(DedupOptions{})
	entries := make([]Entry, 1<<17)
	for i := range entries {
		entries[i] = Entry{Topic: []byte("sensors/dev-0001/telemetry"), Payload: fmt.Appendf(bytes.Repeat([]byte{'x'}, 90), "%010d", i)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.Observe(&entries[i%len(entries)])
	}
}

// BenchmarkAppendCompressed measures AfterWrite Appends of batches of 256
// sensor readings ({"device":…,"ts":…,"temp":…,"humidity":…} on per-device
// topics, as the simulator publishes them) with and without Compress, and
// reports the bytes stored per entry.
func BenchmarkAppendCompressed(b *testing.B) {
	batch := make([]Entry, 256)
	for i := range batch {
		dev := (i * 37) % 1000
		batch[i] = Entry{
			Arrival: 1_764_410_400_000 + int64(i/10),
			Topic:   fmt.Appendf(nil, "sensors/sensor-%d/telemetry", dev),
			Payload: fmt.Appendf(nil, `{"device":"sensor-%d","ts":%d,"temp":%.2f,"humidity":%.1f}`, dev, 1_764_410_400_000+i*4, 18+float64(i%700)/100, 35+float64(i%200)/10),
		}
	}
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compress=%v", compress), func(b *testing.B) {
			l := mustOpen(b, b.TempDir(), Options{Ack: AfterWrite, SyncInterval: -1, Compress: compress})
			defer l.Close()
			b.ReportAllocs()
			var entries int64
			size0 := l.SizeBytes()
			for range b.N {
				if _, _, err := l.Append(batch); err != nil {
					b.Fatal(err)
				}
				entries += int64(len(batch))
				if l.SizeBytes() > 256<<20 {
					b.StopTimer()
					b.ReportMetric(float64(l.SizeBytes()-size0)/float64(entries), "B/entry")
					if err := l.Truncate(l.LastOffset()); err != nil {
						b.Fatal(err)
					}
					size0, entries = l.SizeBytes(), 0
					b.StartTimer()
				}
			}
			if entries > 0 {
				b.ReportMetric(float64(l.SizeBytes()-size0)/float64(entries), "B/entry")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/entry")
		})
	}
}
