package sparkplug

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/state/vfs"
)

// heldBatch is results of the typical shape over 50 keys, written as the
// sink runner hands them over: a batch at a time.
func heldBatch(n int) []record.Item {
	items := make([]record.Item, n)
	for i := range items {
		r := typicalResult
		r.Key = fmt.Appendf(nil, "sensor-%d", i%50)
		r.End += int64(i/50) * 60000
		items[i] = record.Item{Result: &r}
	}
	return items
}

// BenchmarkStoreHold is the cost of holding a result while the node is
// not born: appended to the log in batches of 100 (one write each, synced
// at checkpoints, not here), and the bytes each takes on disk.
func BenchmarkStoreHold(b *testing.B) {
	s, err := openStore(vfs.Default, b.TempDir(), 1<<40)
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	items := heldBatch(100)
	start := s.Bytes()
	b.ReportAllocs()
	cpu := cpuTime(b)
	n := 0
	for b.Loop() {
		r := items[n%len(items)].Result
		s.add(1, r.Key, r.Names, r.Values, r.End)
		if n++; n%100 == 0 {
			if _, err := s.flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := s.flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu).Seconds(), "results/cpu-s")
	b.ReportMetric(float64(s.Bytes()-start)/float64(b.N), "disk-bytes/result")
}

// BenchmarkReplayHeld: a sink (MQTT 3.1.1 through paho, MQTT 5 through
// link5) holds 100,000 results while its primary host is offline, then the host says online: the rate at which the held
// results are published as historical DDATA through mosquitto, from the
// STATE online to the last one handed to the connection, and to the last
// one a subscriber received.
func BenchmarkReplayHeld(b *testing.B) {
	for _, version := range []int{4, 5} {
		b.Run(fmt.Sprintf("mqtt%d", version), func(b *testing.B) { benchmarkReplayHeld(b, version) })
	}
}

func benchmarkReplayHeld(b *testing.B, version int) {
	const n = 100000
	for b.Loop() {
		br := mosquitto.Start(b, mosquitto.Conf("max_queued_messages 0", "max_inflight_messages 0"))
		var got atomic.Int64
		var last atomic.Int64
		sub := paho.NewClient(paho.NewClientOptions().AddBroker(br.URL()).SetClientID("historian"))
		if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		if tok := sub.Subscribe("spBv1.0/plant1/DDATA/#", 0, func(paho.Client, paho.Message) {
			got.Add(1)
			last.Store(time.Now().UnixNano())
		}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		s, err := NewSink(SinkOptions{Broker: br.URL(), ClientID: "gw-7", Node: Config{Group: "plant1", Node: "gw-7", PrimaryHost: "scada-1"},
			BdSeqPath: filepath.Join(b.TempDir(), "scada.bdseq"), ProtocolVersion: version})
		if err != nil {
			b.Fatal(err)
		}
		items := heldBatch(100)
		for range n / len(items) {
			if err := s.WriteEpoch(1, items); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.PreCommit(1); err != nil {
			b.Fatal(err)
		}
		held := s.Stats()
		start, cpu := time.Now(), cpuTime(b)
		if tok := sub.Publish("spBv1.0/STATE/scada-1", 1, true, `{"online":true,"timestamp":1}`); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		await.True(b, 120*time.Second, "every held result handed to the connection", func() bool { return s.Stats().Historical == n })
		sent, sentCPU := time.Since(start), cpuTime(b)-cpu
		await.Holds(30*time.Second, func() bool { return got.Load() == n })
		recv := time.Unix(0, last.Load()).Sub(start)
		b.ReportMetric(float64(n)/sent.Seconds(), "published/s")
		// The agent's CPU alone (the subscriber's included), not
		// mosquitto's: the figure the machine's load changes least.
		b.ReportMetric(float64(n)/sentCPU.Seconds(), "published/cpu-s")
		b.ReportMetric(float64(got.Load())/recv.Seconds(), "received/s")
		b.ReportMetric(float64(got.Load()), "received")
		b.ReportMetric(float64(held.HeldBytes)/n, "disk-bytes/result")
		s.Close()
		sub.Disconnect(100)
	}
}
