package source

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// mustPublisher returns a connected paho client for the test.
func mustPublisher(t testing.TB, url, id string) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(false).SetAutoReconnect(true).
		SetMaxReconnectInterval(200 * time.Millisecond)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(250) })
	return c
}

func mustPublish(t testing.TB, c paho.Client, topic string, qos byte, payloads ...string) {
	t.Helper()
	var last paho.Token
	for _, p := range payloads {
		last = c.Publish(topic, qos, false, p)
	}
	if last != nil && (!last.WaitTimeout(30*time.Second) || last.Error() != nil) {
		t.Fatalf("publish: %v", last.Error())
	}
}

// runningSource runs src until the test ends or stop is called.
type runningSource struct {
	out    chan []Message
	cancel context.CancelFunc
	done   chan error
}

func startSource(t testing.TB, src Source) *runningSource {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningSource{out: make(chan []Message, 16), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- src.Run(ctx, r.out) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *runningSource) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run did not return after cancel")
	}
}

// receive collects n messages, failing the test after timeout.
func (r *runningSource) receive(t testing.TB, n int, timeout time.Duration) []Message {
	t.Helper()
	var got []Message
	deadline := time.After(timeout)
	for len(got) < n {
		select {
		case b := <-r.out:
			if len(b) == 0 || len(b) > MaxBatch {
				t.Fatalf("batch of %d messages", len(b))
			}
			got = append(got, b...)
		case <-deadline:
			t.Fatalf("received %d of %d messages", len(got), n)
		}
	}
	return got
}

func seqs(t testing.TB, msgs []Message) []int {
	t.Helper()
	out := make([]int, len(msgs))
	for i, m := range msgs {
		n, err := strconv.Atoi(string(m.Payload))
		if err != nil {
			t.Fatalf("payload %q", m.Payload)
		}
		out[i] = n
	}
	return out
}

func numbered(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(from + i)
	}
	return out
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	return slog.New(slog.DiscardHandler)
}

func TestMQTT_Receives5000QoS1(t *testing.T) {
	broker := mosquitto.Start(t)
	src := NewMQTT(MQTTOptions{Broker: broker.URL(), ClientID: "eddy-5000", Topics: []string{"sensors/+/telemetry"}, QoS: 1}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-5000")
	var last paho.Token // publish without waiting: paho sends in the background
	for _, p := range numbered(0, 5000) {
		last = pub.Publish("sensors/s1/telemetry", 1, false, p)
	}
	// Ack batch by batch, as the agent does after its ingest-log append:
	// the broker's in-flight window (1000) holds back the rest until then.
	var got []Message
	for len(got) < 5000 {
		batch := r.receive(t, 1, 30*time.Second)
		for i := range batch {
			batch[i].Ack()
			batch[i].Ack() // a second call does nothing
		}
		got = append(got, batch...)
	}
	if !last.WaitTimeout(10*time.Second) || last.Error() != nil {
		t.Fatalf("publish: %v", last.Error())
	}
	for i, n := range seqs(t, got) {
		if n != i {
			t.Fatalf("message %d is %d: lost, duplicated or out of order", i, n)
		}
		if got[i].Offset != uint64(i+1) || got[i].Topic != "sensors/s1/telemetry" || got[i].Arrival == 0 {
			t.Fatalf("message %d: %+v", i, got[i])
		}
	}
	if st := src.(StatsReporter).Stats(); st.Received != 5000 || st.Dropped != 0 || !st.Connected {
		t.Fatalf("stats %+v", st)
	}
}

// waitConnected waits until the source has subscribed: messages published
// before would not be queued for the session.
func waitConnected(t testing.TB, src Source) {
	t.Helper()
	await.True(t, 10*time.Second, "the source to connect", func() bool { return src.(StatsReporter).Stats().Connected })
}

// TestMQTT_UnackedRedelivered proves the manual-ack path: messages the
// receiver did not ack are redelivered when the source connects again with
// its persistent session; acked ones are not.
func TestMQTT_UnackedRedelivered(t *testing.T) {
	for _, qos := range []byte{1, 2} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			broker := mosquitto.Start(t)
			opts := MQTTOptions{Broker: broker.URL(), ClientID: "eddy-redeliver", Topics: []string{"t/#"}, QoS: qos}
			src := NewMQTT(opts, testLogger(t))
			r := startSource(t, src)
			waitConnected(t, src)
			pub := mustPublisher(t, broker.URL(), "pub-redeliver")

			mustPublish(t, pub, "t/a", qos, numbered(0, 100)...)
			first := r.receive(t, 100, 30*time.Second)
			for _, m := range first[:40] {
				m.Ack() // the first 40 are safe; 40..99 are not acked
			}
			r.stop(t)

			// A new Run (a new connection with the same session) gets the
			// 60 unacked messages again, in order, before newer ones. The
			// broker may also repeat the last acked messages: MQTT does not
			// confirm an ack, and acks written just before the disconnect
			// can be lost with the closing connection (or, at QoS 2, the
			// PUBREL/PUBCOMP exchange is cut short). Such repeats form a
			// contiguous run just before 40; the ingest log drops them.
			src2 := NewMQTT(opts, testLogger(t))
			r2 := startSource(t, src2)
			var again []int
			for len(again) == 0 || again[len(again)-1] != 99 {
				m := r2.receive(t, 1, 30*time.Second)
				again = append(again, seqs(t, m)...)
				for i := range m {
					m[i].Ack()
				}
			}
			start := again[0]
			if len(again) != 100-start || start > 40 {
				t.Fatalf("redelivered %v, want %d..99", again, start)
			}
			for i, n := range again {
				if n != start+i {
					t.Fatalf("redelivered %v, want %d..99", again, start)
				}
			}
			if start != 40 {
				t.Logf("broker repeated %d acked messages", 40-start)
			}
			mustPublish(t, pub, "t/a", qos, "marker")
			next := r2.receive(t, 1, 30*time.Second)
			if string(next[0].Payload) != "marker" {
				t.Fatalf("after the redeliveries got %q, want the marker", next[0].Payload)
			}
			next[0].Ack()
			r2.stop(t)

			// Everything was acked: a third connection gets nothing but new
			// messages, apart from repeats of the last acked ones.
			r3 := startSource(t, NewMQTT(opts, testLogger(t)))
			mustPublish(t, pub, "t/a", qos, "fresh")
			for repeats := 0; ; repeats++ {
				m := r3.receive(t, 1, 30*time.Second)[0]
				if string(m.Payload) == "fresh" {
					t.Logf("third connection: %d repeats before the fresh message", repeats)
					break
				}
				if p := string(m.Payload); p != "marker" && p != "99" && p != "98" && p != "97" || repeats > 10 {
					t.Fatalf("third connection got %q: an acked message came back beyond the last few", p)
				}
			}
		})
	}
}

// TestMQTT_ReconnectAfterBrokerRestart restarts mosquitto under a running
// source: it reconnects with backoff, reports the connection changes, and
// gets the unacked messages again from the broker's persisted session.
func TestMQTT_ReconnectAfterBrokerRestart(t *testing.T) {
	broker := mosquitto.Start(t)
	var mu sync.Mutex
	var changes []bool
	src := NewMQTT(MQTTOptions{
		Broker: broker.URL(), ClientID: "eddy-restart", Topics: []string{"t"}, QoS: 1,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond,
		OnConnectionChange: func(up bool) { mu.Lock(); changes = append(changes, up); mu.Unlock() },
	}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-restart")
	mustPublish(t, pub, "t", 1, numbered(0, 10)...)
	r.receive(t, 10, 30*time.Second) // not acked

	broker.Restart()
	again := r.receive(t, 10, 30*time.Second)
	for i, n := range seqs(t, again) {
		if n != i {
			t.Fatalf("after restart message %d is %d, want the unacked %d again", i, n, i)
		}
		again[i].Ack()
	}
	// Redeliveries may arrive before the subscription is renewed and the
	// source reports itself connected.
	waitConnected(t, src)
	st := src.(StatsReporter).Stats()
	if st.Reconnects != 1 || !st.Connected {
		t.Fatalf("stats %+v, want 1 reconnect and connected", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(changes) != "[true false true]" {
		t.Fatalf("connection changes %v, want [true false true]", changes)
	}
}

// TestMQTT_KeepaliveThroughOwnReader: the connection reads the packets
// itself and hands paho only the non-PUBLISH ones; paho's keepalive must
// still get its PINGRESPs, or it drops the connection once its ping timeout
// (10 s) passes after the first unanswered ping. With a 1 s keepalive, 14 s
// of messages and silence pass without a reconnect.
func TestMQTT_KeepaliveThroughOwnReader(t *testing.T) {
	broker := mosquitto.Start(t)
	src := NewMQTT(MQTTOptions{Broker: broker.URL(), ClientID: "eddy-keepalive", Topics: []string{"t"}, QoS: 1,
		KeepAlive: time.Second, ReconnectMin: 20 * time.Millisecond}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-keepalive")
	const n = 14
	for i := range n {
		mustPublish(t, pub, "t", 1, strconv.Itoa(i))
		m := r.receive(t, 1, 30*time.Second)
		AckAll(m)
		time.Sleep(time.Second) // pacing: a keepalive ping interval passes between publishes
	}
	if st := src.(StatsReporter).Stats(); st.Reconnects != 0 || !st.Connected || st.Received != n {
		t.Fatalf("stats %+v, want %d received on one connection", st, n)
	}
}

func TestMQTT_QoS0DropsOverMaxPending(t *testing.T) {
	broker := mosquitto.Start(t)
	src := NewMQTT(MQTTOptions{Broker: broker.URL(), ClientID: "eddy-qos0", Topics: []string{"t"}, QoS: 0, MaxPending: 10}, testLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan []Message) // nobody reads: the queue fills
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, out) }()
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-qos0")
	mustPublish(t, pub, "t", 0, numbered(0, 100)...)
	mustPublish(t, pub, "flush", 1, "x") // QoS 0 messages were sent before this
	await.Until(t, 10*time.Second, func() error {
		if st := src.(StatsReporter).Stats(); st.Received+st.Dropped != 100 {
			return fmt.Errorf("stats %+v: not all 100 messages accounted for", st)
		}
		return nil
	})
	if st := src.(StatsReporter).Stats(); st.Dropped == 0 || st.Received > 10+MaxBatch {
		t.Fatalf("stats %+v: want drops with MaxPending 10", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestMQTT_InvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts MQTTOptions
		want string
	}{
		{"bad scheme", MQTTOptions{Broker: "http://x:1", ClientID: "c", Topics: []string{"t"}}, "scheme"},
		{"no host", MQTTOptions{Broker: "tcp://", ClientID: "c", Topics: []string{"t"}}, "no host"},
		{"no client id", MQTTOptions{Broker: "tcp://x:1", Topics: []string{"t"}}, "client id"},
		{"no topics", MQTTOptions{Broker: "tcp://x:1", ClientID: "c"}, "no topics"},
		{"bad qos", MQTTOptions{Broker: "tcp://x:1", ClientID: "c", Topics: []string{"t"}, QoS: 3}, "qos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewMQTT(tt.opts, nil).Run(context.Background(), make(chan []Message))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "source: ") {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestMQTT_RetriesUntilBrokerUp starts the source before the broker.
func TestMQTT_RetriesUntilBrokerUp(t *testing.T) {
	broker := mosquitto.Start(t)
	broker.Stop()
	src := NewMQTT(MQTTOptions{Broker: broker.URL(), ClientID: "eddy-late", Topics: []string{"t"}, QoS: 1,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond}, testLogger(t))
	r := startSource(t, src)
	broker.Restart()
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-late")
	mustPublish(t, pub, "t", 1, "hello")
	if got := r.receive(t, 1, 30*time.Second); string(got[0].Payload) != "hello" {
		t.Fatalf("got %q", got[0].Payload)
	}
	if st := src.(StatsReporter).Stats(); st.Reconnects != 0 {
		t.Fatalf("failed first attempts counted as reconnects: %+v", st)
	}
}
