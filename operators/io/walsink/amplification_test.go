package walsink

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// BenchmarkWALSink_WriteAmplification delivers b.N results of 132 bytes
// (topic + payload, as the agent's window results are) through the sink to
// a real mosquitto, a checkpoint every perEpoch results, and reports what
// the WAL cost against the results' own bytes. default_broker is mosquitto
// with its defaults and the sink's default window (20 in flight);
// tuned_broker the settings the README asks for (max_inflight_messages
// 1000) with max_inflight = 1000 on the sink. Metrics:
//
//   - walB/resultB: bytes the sink appended to the WAL (frames), per result byte;
//   - diskB/resultB: the process's write_bytes (/proc/self/io: every page
//     the sink dirtied, so a page rewritten after each fsync counts each
//     time) per result byte;
//   - over1.5x-B/ckpt: write_bytes beyond 1.5 × the results' bytes, per
//     checkpoint (the fixed per-checkpoint part, when the rest is under 1.5×);
//   - syncs/ckpt, and appended bytes per result by record kind.
func BenchmarkWALSink_WriteAmplification(b *testing.B) {
	for _, bc := range []struct {
		name        string
		broker      []mosquitto.Option
		maxInflight int
	}{
		{"default_broker", []mosquitto.Option{mosquitto.DefaultInflight()}, 0},
		{"tuned_broker", nil, 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchWriteAmplification(b, mosquitto.Start(b, bc.broker...), bc.maxInflight)
		})
	}
}

func benchWriteAmplification(b *testing.B, broker *mosquitto.Broker, maxInflight int) {
	const perEpoch = 500
	var (
		byKind    [16]atomic.Int64
		appended  atomic.Int64
		syncs     atomic.Int64
		mu        sync.Mutex
		delivered int
		progress  = make(chan struct{}, 1)
	)
	opts := Options{Broker: broker.URL(), ClientID: "walsink-amp", MaxInflight: maxInflight, MaxDiskBytes: 4 << 30}
	opts.onWrite = func(frames []byte) {
		appended.Add(int64(len(frames)))
		for len(frames) >= wal.FrameHeaderBytes {
			n := wal.FrameHeaderBytes + int(binary.LittleEndian.Uint32(frames))
			byKind[frames[wal.FrameHeaderBytes]&15].Add(int64(n))
			frames = frames[n:]
		}
	}
	opts.onSync = func() { syncs.Add(1) }
	opts.onComplete = func(uint64) {
		mu.Lock()
		delivered++
		mu.Unlock()
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	s, err := Open(b.TempDir(), opts, testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	msgs := make([]Message, perEpoch)
	var resultBytes int64
	for i := range msgs {
		topic := fmt.Sprintf("eddy/results/dev-%04d", i%1000)
		payload := fmt.Appendf(nil, `{"device":"dev-%04d","window_start":1764650000000,"window_end":1764650010000,"count":10,"sum":213.5,"max":24.1}`, i%1000)
		msgs[i] = Message{Topic: topic, Payload: payload}
	}
	waitDeliveredAtLeast := func(n int) {
		for {
			mu.Lock()
			d := delivered
			mu.Unlock()
			if d >= n {
				return
			}
			<-progress
		}
	}
	io0 := procWriteBytes(b)
	b.ResetTimer()
	total, epochs := 0, 0
	for epoch := uint64(1); total < b.N; epoch++ {
		// At most two checkpoints' results waiting: delivery keeps up, as
		// in steady operation.
		waitDeliveredAtLeast(total - perEpoch)
		n := min(perEpoch, b.N-total)
		if err := s.Write(epoch, msgs[:n]); err != nil {
			b.Fatal(err)
		}
		if err := s.PreCommit(epoch); err != nil {
			b.Fatal(err)
		}
		if err := s.Commit(epoch); err != nil {
			b.Fatal(err)
		}
		for _, m := range msgs[:n] {
			resultBytes += int64(len(m.Topic) + len(m.Payload))
		}
		total += n
		epochs++
	}
	waitDeliveredAtLeast(total)
	b.StopTimer()
	disk := procWriteBytes(b) - io0
	rb := float64(resultBytes)
	b.ReportMetric(rb/float64(total), "resultB")
	b.ReportMetric(float64(appended.Load())/rb, "walB/resultB")
	b.ReportMetric(float64(disk)/rb, "diskB/resultB")
	b.ReportMetric((float64(disk)-1.5*rb)/float64(epochs), "over1.5x-B/ckpt")
	b.ReportMetric(float64(syncs.Load())/float64(epochs), "syncs/ckpt")
	b.ReportMetric(float64(byKind[kindState].Load())/float64(total), "stateB/result")
	data := byKind[kindDataCompact].Load()
	b.ReportMetric(float64(data)/float64(total), "dataB/result")
	steps := byKind[kindSteps].Load()
	b.ReportMetric(float64(steps)/float64(total), "stepsB/result")
	marks := byKind[kindPreCommit].Load() + byKind[kindCommit].Load()
	b.ReportMetric(float64(marks)/float64(total), "marksB/result")
}

// procWriteBytes is this process's write_bytes: the bytes of the pages it
// dirtied in the page cache, each counted again when dirtied after a
// writeback (an fsync of a partly written page, say).
func procWriteBytes(tb testing.TB) int64 {
	tb.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		tb.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("write_bytes: ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("no write_bytes in /proc/self/io")
	return 0
}
