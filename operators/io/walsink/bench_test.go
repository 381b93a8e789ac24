package walsink

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// BenchmarkSink_Mosquitto measures messages/s from Commit to the broker's
// PUBCOMP with a real mosquitto (persistence on), and the latency from
// Commit to each message's PUBCOMP. "saturated" commits epochs of 1000
// back to back (latency includes queueing behind the backlog); "paced"
// commits an epoch of 100 every 20 ms, below capacity; the _qos1 cases
// publish at QoS 1. walB/msg is what the WAL wrote per message (data,
// marks, flow or acknowledgement records, segment headers) against msgB,
// the message's own topic and payload.
func BenchmarkSink_Mosquitto(b *testing.B) {
	for _, bc := range []struct {
		name     string
		perEpoch int
		pause    time.Duration
		qos      byte
		version  byte // 0: the default, MQTT 5
	}{
		{"saturated", 1000, 0, 2, 0},
		{"paced", 100, 20 * time.Millisecond, 2, 0},
		{"single", 1, 5 * time.Millisecond, 2, 0},
		{"saturated_qos1", 1000, 0, 1, 0},
		{"paced_qos1", 100, 20 * time.Millisecond, 1, 0},
		{"saturated_v311", 1000, 0, 2, 4},
		{"saturated_qos1_v311", 1000, 0, 1, 4},
	} {
		b.Run(bc.name, func(b *testing.B) {
			broker := mosquitto.Start(b)
			var mu sync.Mutex
			var done []time.Time // by seq-1
			opts := Options{Broker: broker.URL(), ClientID: "walsink-bench", MaxInflight: 100, MaxDiskBytes: 4 << 30, QoS: bc.qos,
				ProtocolVersion: bc.version}
			opts.onComplete = func(seq uint64) {
				mu.Lock()
				for uint64(len(done)) < seq {
					done = append(done, time.Time{})
				}
				done[seq-1] = time.Now()
				mu.Unlock()
			}
			s, err := Open(b.TempDir(), opts, testLogger(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			// A 200-byte result with an id, as Eddy's output records
			// start (at MQTT 5 it becomes a user property).
			payload := []byte(`{"id":"gw-7/bench/sensor-3/1795946400000-1795946460000/0","pipeline":"bench","n":1,"pad":"`)
			payload = append(payload, bytes.Repeat([]byte("x"), 200-len(payload)-2)...)
			payload = append(payload, `"}`...)
			m := make([]Message, bc.perEpoch)
			for i := range m {
				m[i] = Message{Topic: "bench/out", Payload: payload}
			}
			var committedAt []time.Time // by epoch-1
			total := 0
			b.ResetTimer()
			start := time.Now()
			for epoch := uint64(1); total < b.N; epoch++ {
				if err := s.Write(epoch, m); err != nil {
					b.Fatal(err)
				}
				if err := s.PreCommit(epoch); err != nil {
					b.Fatal(err)
				}
				committedAt = append(committedAt, time.Now())
				if err := s.Commit(epoch); err != nil {
					b.Fatal(err)
				}
				total += bc.perEpoch
				if bc.pause > 0 {
					time.Sleep(bc.pause) // pacing: the paced cases' commit interval
				}
			}
			await.True(b, 10*time.Minute, "every message delivered", func() bool { return s.Stats().Delivered >= uint64(total) })
			elapsed := time.Since(start)
			b.StopTimer()
			mu.Lock()
			lat := make([]time.Duration, 0, total)
			for i, at := range done {
				lat = append(lat, at.Sub(committedAt[i/bc.perEpoch]))
			}
			mu.Unlock()
			slices.Sort(lat)
			b.ReportMetric(float64(total)/elapsed.Seconds(), "msgs/s")
			// Wear: WAL bytes written per delivered message, against the
			// message's own topic + payload.
			b.ReportMetric(float64(s.wal.Written())/float64(total), "walB/msg")
			b.ReportMetric(float64(len(m[0].Topic)+len(m[0].Payload)), "msgB")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
