package sparkplug

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/scripts/aedes"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// hostApp records what a host application subscribed to a group sees.
type hostApp struct {
	mu     sync.Mutex
	got    []received
	client paho.Client
}

func newHostApp(t *testing.T, url, group string) *hostApp {
	h := &hostApp{}
	h.client = paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("scada-1").SetAutoReconnect(false).SetOrderMatters(true))
	if tok := h.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	t.Cleanup(func() { h.client.Disconnect(0) })
	if tok := h.client.Subscribe("spBv1.0/"+group+"/#", 1, func(_ paho.Client, m paho.Message) {
		var p Payload
		if err := DecodePayload(append([]byte(nil), m.Payload()...), &p); err != nil {
			t.Errorf("%s: %v", m.Topic(), err)
		}
		h.mu.Lock()
		h.got = append(h.got, received{m.Topic(), p})
		h.mu.Unlock()
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	return h
}

func (h *hostApp) messages() []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// state publishes the host's retained STATE.
func (h *hostApp) state(t *testing.T, online bool, ts int64) {
	t.Helper()
	payload := fmt.Sprintf(`{"online":%v,"timestamp":%d}`, online, ts)
	if tok := h.client.Publish("spBv1.0/STATE/scada-1", 1, true, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
}

// summary is "TYPE seq hist[,hist…] ts[,ts…]" per message, for assertions.
func summary(rs []received) []string {
	var out []string
	for _, r := range rs {
		parts := strings.Split(r.topic, "/")
		s := parts[2]
		if r.p.HasSeq {
			s += fmt.Sprintf(" seq=%d", r.p.Seq)
		}
		if parts[2] == "NBIRTH" || parts[2] == "NDEATH" {
			for _, m := range r.p.Metrics {
				if string(m.Name) == BdSeqMetric {
					s += fmt.Sprintf(" bdSeq=%d", m.Value.Bits)
				}
			}
		}
		if parts[2] == "DDATA" {
			s += fmt.Sprintf(" ts=%d hist=%v", r.p.Metrics[0].Timestamp, r.p.Metrics[0].IsHistorical)
		}
		out = append(out, s)
	}
	return out
}

func result(key string, end int64, v float64) record.Item {
	return record.Item{Result: &record.Result{Pipeline: "p", Key: []byte(key), Start: end - 60000, End: end, Kind: record.KindFinal,
		Names: []string{"n", "avg"}, Values: []float64{v, v / 2}}}
}

// TestSink_PrimaryHostAndHeldResults: through mosquitto, in MQTT 3.1.1
// and in MQTT 5, a sink with a
// primary host holds results until the host's STATE says online, then publishes NBIRTH, the DBIRTH and
// the held results as historical DDATA in order, and later results live;
// STATE offline ends the session with an NDEATH; the next session (the
// next bdSeq) waits for online again and sends what was held meanwhile;
// Close publishes the last session's NDEATH.
func TestSink_PrimaryHostAndHeldResults(t *testing.T) {
	for _, version := range []int{4, 5} {
		t.Run(fmt.Sprintf("mqtt%d", version), func(t *testing.T) { testPrimaryHostAndHeldResults(t, version) })
	}
}

func testPrimaryHostAndHeldResults(t *testing.T, version int) {
	b := mosquitto.Start(t)
	host := newHostApp(t, b.URL(), "plant1")
	s, err := NewSink(SinkOptions{Broker: b.URL(), ClientID: "gw-7", Node: Config{Group: "plant1", Node: "gw-7", PrimaryHost: "scada-1"},
		BdSeqPath: filepath.Join(t.TempDir(), "sparkplug", "scada.bdseq"), ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]record.Item{result("m1", 60000, 1), result("m1", 120000, 2), result("m1", 180000, 3)}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Held != 3 || st.Dropped != 0 || st.Published != 0 {
		t.Fatalf("before the host is online: %+v; want 3 held, none dropped or published", st)
	}
	host.state(t, true, 1)
	await.True(t, 20*time.Second, "births and the held results", func() bool { return len(host.messages()) >= 5 })
	if p := s.Stats().Protocol; p != version {
		t.Errorf("connected in MQTT %d, want %d", p, version)
	}
	if err := s.Write([]record.Item{result("m1", 240000, 4)}); err != nil {
		t.Fatal(err)
	}
	await.True(t, 20*time.Second, "the live result", func() bool { return len(host.messages()) >= 6 })
	host.state(t, false, 2)
	await.True(t, 20*time.Second, "the NDEATH of a host gone offline", func() bool { return len(host.messages()) >= 7 })
	await.True(t, 20*time.Second, "the session ended", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.node.Born()
	})
	if err := s.Write([]record.Item{result("m1", 300000, 5)}); err != nil {
		t.Fatal(err)
	}
	host.state(t, true, 3)
	await.True(t, 30*time.Second, "the next session's births and held result", func() bool { return len(host.messages()) >= 10 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	await.True(t, 20*time.Second, "the NDEATH at Close", func() bool { return len(host.messages()) >= 11 })
	want := []string{
		"NBIRTH seq=0 bdSeq=0", "DBIRTH seq=1",
		"DDATA seq=2 ts=60000 hist=true", "DDATA seq=3 ts=120000 hist=true", "DDATA seq=4 ts=180000 hist=true",
		"DDATA seq=5 ts=240000 hist=false",
		"NDEATH bdSeq=0",
		"NBIRTH seq=0 bdSeq=1", "DBIRTH seq=1", "DDATA seq=2 ts=300000 hist=true",
		"NDEATH bdSeq=1",
	}
	if got := summary(host.messages()); !slices.Equal(got, want) {
		t.Fatalf("host saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st := s.Stats(); st.Published != 5 || st.Historical != 4 || st.Held != 0 {
		t.Errorf("stats %+v; want 5 published, 4 of them historical, none held", st)
	}
}

// TestResultJSON_ReadsAppendJSON: a result that reaches the sink as JSON
// only reads back as the Result it was encoded from, null (NaN) included,
// with the aggregates in their order (the definition hash is not one); a
// record that is not a window result is refused.
func TestResultJSON_ReadsAppendJSON(t *testing.T) {
	r := record.Result{Pipeline: "p", Key: []byte(`s/"1"`), Start: 60000, End: 120000, Kind: record.KindLateUpdate, Firing: 2,
		Names: []string{"zeta", "alpha", "n"}, Values: []float64{1.5, math.NaN(), 7}, Definition: "0a1b2c3d"}
	var j resultJSON
	got, err := j.decode(record.AppendJSON(nil, "gw-7", &r))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Key) != string(r.Key) || got.End != r.End || got.Start != r.Start || !slices.Equal(got.Names, r.Names) ||
		got.Values[0] != 1.5 || !math.IsNaN(got.Values[1]) || got.Values[2] != 7 {
		t.Fatalf("decoded %+v, want %+v", got, r)
	}
	reading := record.AppendReadingJSON(nil, "gw-7", &record.Result{Pipeline: "p", Key: []byte("k"), Start: 5}, nil, nil)
	for _, payload := range [][]byte{reading, []byte(`{"pipeline":"p","reason":"late"}`), []byte("not json")} {
		if _, err := j.decode(payload); err != errNotResult {
			t.Errorf("decode(%s): %v, want errNotResult", payload, err)
		}
	}
}

// TestResultJSON_KnowsEveryOwnField: every field a result record carries
// besides its aggregates is one the sink skips, so that a field added to
// the record is not taken for an aggregate (which refuses the result).
func TestResultJSON_KnowsEveryOwnField(t *testing.T) {
	r := record.Result{Pipeline: "p", Key: []byte("k"), Start: 1, End: 2, Kind: record.KindFinal, Definition: "0a1b2c3d"}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(record.AppendJSON(nil, "gw-7", &r), &fields); err != nil {
		t.Fatal(err)
	}
	for name := range fields {
		if !slices.Contains(fixedFields, name) {
			t.Errorf("the record's own field %q is not in fixedFields", name)
		}
	}
}

// TestSink_BdSeqCountsConnectsOnly: attempts that never reach the broker
// send no CONNECT and take no bdSeq: the first session after them is
// bdSeq 0, and the file holds 1 for the next.
func TestSink_BdSeqCountsConnectsOnly(t *testing.T) {
	for _, version := range []int{4, 5} {
		t.Run(fmt.Sprintf("mqtt%d", version), func(t *testing.T) { testBdSeqCountsConnectsOnly(t, version) })
	}
}

func testBdSeqCountsConnectsOnly(t *testing.T, version int) {
	b := mosquitto.Start(t)
	b.Stop()
	path := filepath.Join(t.TempDir(), "sparkplug", "scada.bdseq")
	s, err := NewSink(SinkOptions{Broker: b.URL(), ClientID: "gw-7", Node: Config{Group: "plant1", Node: "gw-7"}, BdSeqPath: path, ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Attempts at 0 and 1 s find no broker.
	await.Never(t, 1500*time.Millisecond, func() error {
		if s.Stats().Born {
			return fmt.Errorf("born with the broker down")
		}
		return nil
	})
	b.Restart()
	await.True(t, 20*time.Second, "the births after the broker came back", func() bool { return s.Stats().Born })
	if bd := s.Stats().BdSeq; bd != 0 {
		t.Errorf("first session's bdSeq %d, want 0", bd)
	}
	if next, err := os.ReadFile(path); err != nil || string(next) != "1" {
		t.Errorf("bdSeq file %q (%v), want 1", next, err)
	}
}

// TestSink_HeldAcrossRestartAwaitRecover: results held when a sink closes
// are read back by the next one from its log; with AwaitRecover it
// publishes none before Recover, which discards those of the epochs after
// the restored checkpoint (replay computes them again), then publishes
// the rest as historical, in order.
func TestSink_HeldAcrossRestartAwaitRecover(t *testing.T) {
	b := mosquitto.Start(t)
	host := newHostApp(t, b.URL(), "plant1")
	opts := SinkOptions{Broker: b.URL(), ClientID: "gw-7", Node: Config{Group: "plant1", Node: "gw-7", PrimaryHost: "scada-1"},
		BdSeqPath: filepath.Join(t.TempDir(), "sparkplug", "scada.bdseq"), AwaitRecover: true}
	s, err := NewSink(opts)
	if err != nil {
		t.Fatal(err)
	}
	for epoch, end := range []int64{60000, 120000, 180000} {
		if err := s.WriteEpoch(uint64(epoch+1), []record.Item{result("m1", end, float64(epoch))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PreCommit(3); err != nil {
		t.Fatal(err)
	}
	// Connected (not born: the host is offline), so Close publishes the
	// NDEATH.
	await.True(t, 20*time.Second, "the first sink connected", func() bool { return s.Stats().Protocol != 0 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	host.state(t, true, 1)
	if s, err = NewSink(opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	await.True(t, 20*time.Second, "the births", func() bool { return s.Stats().Born })
	if st := s.Stats(); st.Held != 3 || st.Published != 0 {
		t.Fatalf("born before Recover: %+v; want 3 held, none published", st)
	}
	if err := s.Recover(2); err != nil {
		t.Fatal(err)
	}
	await.True(t, 20*time.Second, "the held results of epochs 1 and 2", func() bool { return s.Stats().Historical == 2 })
	// The first sink was connected, never born (the host offline), and
	// closed with its NDEATH.
	want := []string{"NDEATH bdSeq=0", "NBIRTH seq=0 bdSeq=1", "DBIRTH seq=1", "DDATA seq=2 ts=60000 hist=true", "DDATA seq=3 ts=120000 hist=true"}
	if !await.Holds(20*time.Second, func() bool { return len(host.messages()) >= len(want) }) {
		t.Fatalf("host saw only\n%s\nwant\n%s", strings.Join(summary(host.messages()), "\n"), strings.Join(want, "\n"))
	}
	if got := summary(host.messages()); !slices.Equal(got, want) {
		t.Fatalf("host saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st := s.Stats(); st.Held != 0 {
		t.Errorf("after Recover and the births: %+v; want none held", st)
	}
}

// TestSink_MQTT5FallsBack: a broker that does not speak MQTT 5 (aedes
// answers with a 3.1.1 CONNACK refusing the version) gets MQTT 3.1.1 at
// once, under the same bdSeq (the refused CONNECT registered no will).
func TestSink_MQTT5FallsBack(t *testing.T) {
	b := aedes.Start(t)
	host := newHostApp(t, b.URL(), "plant1")
	s, err := NewSink(SinkOptions{Broker: b.URL(), ClientID: "gw-7", Node: Config{Group: "plant1", Node: "gw-7"},
		BdSeqPath: filepath.Join(t.TempDir(), "sparkplug", "scada.bdseq"), ProtocolVersion: 5})
	if err != nil {
		t.Fatal(err)
	}
	await.True(t, 20*time.Second, "the births", func() bool { return len(host.messages()) >= 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	await.True(t, 20*time.Second, "the NDEATH at Close", func() bool { return len(host.messages()) >= 2 })
	if got, want := summary(host.messages()), []string{"NBIRTH seq=0 bdSeq=0", "NDEATH bdSeq=0"}; !slices.Equal(got, want) {
		t.Errorf("host saw %q, want %q", got, want)
	}
	if p := s.Stats().Protocol; p != 4 {
		t.Errorf("connected in MQTT %d after the fallback, want 4", p)
	}
}
