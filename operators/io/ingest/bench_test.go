package ingest

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
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

// readingBatches are n batches of 768 JSON readings as the simulator
// publishes them (~60-byte payloads, 1,000 devices round robin on their own
// topics, each device's values a random walk), 768 being the commit size of
// the agent's ingest linger at high rates.
func readingBatches(n int) [][]Entry {
	rng := rand.New(rand.NewPCG(1, 2))
	temp, hum := make([]float64, 1000), make([]float64, 1000)
	for i := range temp {
		temp[i], hum[i] = 17+10*rng.Float64(), 30+30*rng.Float64()
	}
	batches := make([][]Entry, n)
	now, dev := int64(1_764_410_400_000), 0
	for k := range batches {
		batch := make([]Entry, 768)
		for i := range batch {
			temp[dev] += 0.15 * rng.NormFloat64()
			hum[dev] = min(max(hum[dev]+0.3*rng.NormFloat64(), 0), 100)
			batch[i] = Entry{
				Arrival: now,
				Topic:   fmt.Appendf(nil, "bench/fp-file/sensor-%d", dev+1),
				Payload: fmt.Appendf(nil, `{"device":"sensor-%d","ts":%d,"temp":%g,"humidity":%g}`,
					dev+1, now-rng.Int64N(100), math.Round(temp[dev]*100)/100, math.Round(hum[dev]*10)/10),
			}
			dev = (dev + 1) % len(temp)
			if i%10 == 9 {
				now++
			}
		}
		batches[k] = batch
	}
	return batches
}

// BenchmarkAppendRead measures the agent's ingest path at high rates per
// compression: AfterWrite Appends of 768 readings (readingBatches), each
// read back at once by a live Reader, as the pipeline follows the log. MB/s
// counts the records' uncompressed bytes; cpu-ms/MB is the process's CPU
// time (user and system, getrusage) per MB of them, which holds on a
// loaded machine where wall time does not; B/entry is the bytes stored.
func BenchmarkAppendRead(b *testing.B) {
	batches := readingBatches(64)
	var rawBytes int64
	for _, batch := range batches {
		rawBytes += int64(len(appendRecords(nil, batch)))
	}
	rawPerBatch := rawBytes / int64(len(batches))
	for _, c := range []Compression{CompressNone, CompressS2, CompressZstd} {
		b.Run(c.String(), func(b *testing.B) {
			l := mustOpen(b, b.TempDir(), Options{Ack: AfterWrite, SyncInterval: -1, Compression: c})
			defer l.Close()
			r, err := l.Reader(0)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { r.Close() }()
			b.SetBytes(rawPerBatch)
			b.ReportAllocs()
			var entries, stored int64
			size0 := l.SizeBytes()
			cpu0 := cpuTime(b)
			for i := range b.N {
				batch := batches[i%len(batches)]
				if _, _, err := l.Append(batch); err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := r.Next(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
				entries += int64(len(batch))
				if l.SizeBytes() > 256<<20 {
					b.StopTimer()
					stored += l.SizeBytes() - size0
					r.Close()
					if err := l.Truncate(l.LastOffset()); err != nil {
						b.Fatal(err)
					}
					if r, err = l.Reader(l.LastOffset() + 1); err != nil {
						b.Fatal(err)
					}
					size0 = l.SizeBytes()
					b.StartTimer()
				}
			}
			cpu := cpuTime(b) - cpu0
			stored += l.SizeBytes() - size0
			b.ReportMetric(float64(stored)/float64(entries), "B/entry")
			b.ReportMetric(cpu.Seconds()*1e3/(float64(b.N)*float64(rawPerBatch)/1e6), "cpu-ms/MB")
		})
	}
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
