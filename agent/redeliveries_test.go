package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/operators/io/source"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// syncBuffer is a log destination the intake's timer goroutine and the
// test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log records whose message starts with prefix.
func (s *syncBuffer) lines(t *testing.T, prefix string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(s.b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, rec)
		}
	}
	return out
}

// testIntake is a logIntake on a new log, with a dedup filter of opts,
// its own metrics and a JSON log.
func testIntake(t *testing.T, opts ingest.DedupOptions) (*logIntake, *syncBuffer, *metrics.Set) {
	t.Helper()
	l, err := ingest.Open(t.TempDir(), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d := ingest.NewDedup(opts)
	if err := d.Load(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	set := metrics.NewSet()
	in := &logIntake{log: l, dedup: d, logger: logger, name: "s"}
	in.redelivered = redeliveries{logger: logger, source: "s",
		dropped:   set.NewCounter(`eddy_ingest_redeliveries_dropped_total{source="s"}`),
		unmatched: set.NewCounter(`eddy_ingest_redeliveries_unmatched_total{source="s"}`)}
	return in, &buf, set
}

// readings are MQTT messages r<from> … r<to−1> received on connection c.
func readings(from, to int, dup bool, c source.ConnID, resumed bool) []source.Message {
	var msgs []source.Message
	for i := from; i < to; i++ {
		msgs = append(msgs, source.Message{Topic: "sensors/s1/telemetry", Payload: fmt.Appendf(nil, `{"seq":%d}`, i),
			Arrival: int64(i), Dup: dup, Conn: c, Resumed: resumed})
	}
	return msgs
}

func counter(set *metrics.Set, name string) uint64 {
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	for line := range strings.Lines(buf.String()) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var n uint64
			fmt.Sscan(rest, &n)
			return n
		}
	}
	return 0
}

// TestLogIntake_RedeliveryBursts feeds an MQTT intake the re-sends a broker
// makes after a reconnect, in batches of 100 as the source delivers them,
// and checks what is logged, the counters, and that each burst is logged
// in one line.
func TestLogIntake_RedeliveryBursts(t *testing.T) {
	c1, c2 := source.ConnID{Seq: 1}, source.ConnID{Seq: 2}
	tests := []struct {
		name                string
		first, again        []source.Message
		wantLogged          int
		wantDropped         uint64
		wantUnmatched       uint64
		wantInfo, wantWarns int
	}{
		{"a DUP block is dropped, one line", readings(0, 1000, false, c1, false), readings(0, 1000, true, c2, true),
			1000, 1000, 0, 1, 0},
		{"re-sends without DUP after a resumed session are dropped", readings(0, 1000, false, c1, false), readings(900, 1000, false, c2, true),
			1000, 100, 0, 1, 0},
		{"without a resumed session a repeat is new data", readings(0, 1000, false, c1, false), readings(900, 1000, false, c2, false),
			1100, 0, 0, 0, 0},
		{"DUP messages never logged are kept and warned about once", readings(0, 10, false, c1, false), readings(500, 800, true, c2, true),
			310, 0, 300, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, buf, set := testIntake(t, ingest.DedupOptions{MaxInflight: 1000})
			ctx := context.Background()
			for _, msgs := range [][]source.Message{tt.first, tt.again} {
				for at := 0; at < len(msgs); at += 100 {
					if err := in.appendMessages(ctx, msgs[at:min(at+100, len(msgs))]); err != nil {
						t.Fatal(err)
					}
				}
			}
			in.redelivered.stop()
			if got := in.log.LastOffset(); got != uint64(tt.wantLogged) {
				t.Errorf("log holds %d entries, want %d", got, tt.wantLogged)
			}
			if got := counter(set, `eddy_ingest_redeliveries_dropped_total{source="s"}`); got != tt.wantDropped {
				t.Errorf("dropped counter %d, want %d", got, tt.wantDropped)
			}
			if got := counter(set, `eddy_ingest_redeliveries_unmatched_total{source="s"}`); got != tt.wantUnmatched {
				t.Errorf("unmatched counter %d, want %d", got, tt.wantUnmatched)
			}
			info, warns := buf.lines(t, "ingest: dropped"), buf.lines(t, "ingest: kept messages")
			if len(info) != tt.wantInfo || len(warns) != tt.wantWarns {
				t.Fatalf("%d drop lines and %d unmatched lines, want %d and %d", len(info), len(warns), tt.wantInfo, tt.wantWarns)
			}
			if len(info) == 1 && (info[0]["source"] != "s" || info[0]["dropped"] != float64(tt.wantDropped)) {
				t.Errorf("drop line %v", info[0])
			}
			if len(warns) == 1 && (warns[0]["kept"] != float64(tt.wantUnmatched) || warns[0]["log_first_offset"] != float64(1) ||
				warns[0]["index_covers_log"] != true || warns[0]["source"] != "s") {
				t.Errorf("unmatched line %v", warns[0])
			}
		})
	}
}

// TestLogIntake_BurstsLoggedApart: a burst's line is written once no
// redelivery came for burstQuiet; the next burst gets its own.
func TestLogIntake_BurstsLoggedApart(t *testing.T) {
	in, buf, _ := testIntake(t, ingest.DedupOptions{})
	ctx := context.Background()
	c1, c2, c3 := source.ConnID{Seq: 1}, source.ConnID{Seq: 2}, source.ConnID{Seq: 3}
	if err := in.appendMessages(ctx, readings(0, 100, false, c1, false)); err != nil {
		t.Fatal(err)
	}
	waitLines := func(n int) {
		t.Helper()
		await.Until(t, 10*time.Second, func() error {
			if got := len(buf.lines(t, "ingest: dropped")); got < n {
				return fmt.Errorf("%d burst lines, want %d", got, n)
			}
			return nil
		})
	}
	for i := range 5 { // one burst in five batches
		if err := in.appendMessages(ctx, readings(i*10, i*10+10, true, c2, true)); err != nil {
			t.Fatal(err)
		}
	}
	waitLines(1)
	if err := in.appendMessages(ctx, readings(0, 20, true, c3, true)); err != nil {
		t.Fatal(err)
	}
	waitLines(2)
	lines := buf.lines(t, "ingest: dropped")
	if len(lines) != 2 || lines[0]["dropped"] != float64(50) || lines[1]["dropped"] != float64(20) {
		t.Fatalf("burst lines %v, want 50 then 20 dropped", lines)
	}
}

// TestLogIntake_FlagResumed: the first message logged from each connection
// whose session was resumed carries ingest.FlagResumed; re-sends dropped
// before it do not move the flag, and a connection without a resumed
// session gets none.
func TestLogIntake_FlagResumed(t *testing.T) {
	in, _, _ := testIntake(t, ingest.DedupOptions{MaxInflight: 1000})
	ctx := context.Background()
	c1, c2, c3 := source.ConnID{Seq: 1}, source.ConnID{Seq: 2}, source.ConnID{Seq: 3}
	batches := [][]source.Message{
		readings(0, 10, false, c1, false),                                             // offsets 1-10
		append(readings(5, 10, true, c2, true), readings(10, 13, false, c2, true)...), // re-sends dropped; 11-13
		readings(13, 15, false, c3, false),                                            // 14-15
		readings(15, 17, false, source.ConnID{Session: 1, Seq: 1}, true),              // 16-17
	}
	for _, b := range batches {
		if err := in.appendMessages(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	r, err := in.log.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var flagged []uint64
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Flags&ingest.FlagResumed != 0 {
			flagged = append(flagged, e.Offset)
		}
	}
	if fmt.Sprint(flagged) != "[11 16]" {
		t.Fatalf("FlagResumed on offsets %v, want [11 16]", flagged)
	}
}

// TestEmbeddedIntake_DupResendDropped: a sensor that re-sends a logged
// publish with DUP (its PUBACK lost) is acked again and the log holds the
// reading once; a DUP publish never logged is kept and counted unmatched.
// The sensor is a raw MQTT 3.1.1 client, to send DUP itself.
func TestEmbeddedIntake_DupResendDropped(t *testing.T) {
	b, l, in := startEmbeddedIntake(t, 0)
	set := metrics.NewSet()
	var buf syncBuffer
	in.mu.Lock()
	in.redelivered = redeliveries{logger: slog.New(slog.NewJSONHandler(&buf, nil)), source: "s",
		dropped:   set.NewCounter(`eddy_ingest_redeliveries_dropped_total{source="s"}`),
		unmatched: set.NewCounter(`eddy_ingest_redeliveries_unmatched_total{source="s"}`)}
	in.mu.Unlock()

	conn, err := net.Dial("tcp", strings.TrimPrefix(b.URL(), "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier, cp.Keepalive = "MQTT", 4, "dup-sensor", 30
	if err := cp.Write(conn); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if p, err := packets.ReadPacket(conn); err != nil {
		t.Fatal(err)
	} else if ca, ok := p.(*packets.ConnackPacket); !ok || ca.ReturnCode != 0 {
		t.Fatalf("CONNACK: %v", p)
	}
	publish := func(id uint16, payload string, dup bool) {
		t.Helper()
		pp := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		pp.TopicName, pp.Qos, pp.MessageID, pp.Dup, pp.Payload = "sensors/s1/telemetry", 1, id, dup, []byte(payload)
		if err := pp.Write(conn); err != nil {
			t.Fatal(err)
		}
		p, err := packets.ReadPacket(conn)
		if err != nil {
			t.Fatal(err)
		}
		if pa, ok := p.(*packets.PubackPacket); !ok || pa.MessageID != id {
			t.Fatalf("after PUBLISH %d: %v, want its PUBACK", id, p)
		}
	}
	publish(1, `{"seq":1}`, false)
	publish(2, `{"seq":2}`, false)
	publish(1, `{"seq":1}`, true) // PUBACK lost: the same publish again
	publish(3, `{"seq":3}`, true) // DUP, but its first send never arrived
	publish(2, `{"seq":2}`, true)
	checkLogHolds(t, l, 3, func(i int) string { return fmt.Sprintf(`{"seq":%d}`, i+1) })
	in.redelivered.stop()
	if d, u := counter(set, `eddy_ingest_redeliveries_dropped_total{source="s"}`), counter(set, `eddy_ingest_redeliveries_unmatched_total{source="s"}`); d != 2 || u != 1 {
		t.Fatalf("dropped %d, unmatched %d; want 2 and 1", d, u)
	}
	if n := len(buf.lines(t, "ingest: dropped")); n != 1 {
		t.Fatalf("%d drop lines, want 1", n)
	}
}

// TestMQTTIntake_ResumedSessionFlagged runs the MQTT source into the
// intake against mosquitto and restarts the broker (its session persisted):
// the source reconnects to the resumed session, and the first message
// logged from that connection carries ingest.FlagResumed, whatever the
// broker re-sent before it (acks lost with the restart come back marked
// DUP and are dropped), and the log holds every reading once.
func TestMQTTIntake_ResumedSessionFlagged(t *testing.T) {
	mq := mosquitto.Start(t)
	in, _, _ := testIntake(t, ingest.DedupOptions{MaxInflight: 1000})
	src := source.NewMQTT(source.MQTTOptions{Broker: mq.URL(), ClientID: "eddy-flag", Topics: []string{"sensors/#"}, QoS: 1,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { mqttIntake(src, in, slog.New(slog.DiscardHandler), "s", func(error) {})(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	stats := src.(source.StatsReporter)
	await.True(t, 30*time.Second, `stats.Stats().Connected`, func() bool { return stats.Stats().Connected })

	publish := func(from, to int) {
		t.Helper()
		pub := paho.NewClient(paho.NewClientOptions().AddBroker(mq.URL()).SetClientID("pub-flag").SetAutoReconnect(false))
		if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publisher connect: %v", tok.Error())
		}
		defer pub.Disconnect(100)
		for i := from; i < to; i++ {
			if tok := pub.Publish("sensors/s1/telemetry", 1, false, fmt.Sprintf(`{"seq":%d}`, i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish %d: %v", i, tok.Error())
			}
		}
	}
	publish(0, 10)
	await.True(t, 30*time.Second, `in.log.LastOffset() >= 10`, func() bool { return in.log.LastOffset() >= 10 })
	mq.Restart()
	await.True(t, 30*time.Second, `stats.Stats().Reconnects >= 1 && stats.Stats().Connected`, func() bool { return stats.Stats().Reconnects >= 1 && stats.Stats().Connected })
	publish(10, 20)
	await.True(t, 30*time.Second, `in.log.LastOffset() >= 20`, func() bool { return in.log.LastOffset() >= 20 })

	checkLogHolds(t, in.log, 20, func(i int) string { return fmt.Sprintf(`{"seq":%d}`, i) })
	r, err := in.log.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var flagged []uint64
	for range 20 {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.Flags&ingest.FlagResumed != 0 {
			flagged = append(flagged, e.Offset)
		}
	}
	if fmt.Sprint(flagged) != "[11]" {
		t.Fatalf("FlagResumed on offsets %v, want [11]: the first message logged after the resume", flagged)
	}
}
