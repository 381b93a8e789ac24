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
