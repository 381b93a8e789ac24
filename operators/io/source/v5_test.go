package source

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/mqttprops"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/mqtt5"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/scripts/rabbitmq"
)

// v5Publisher is an MQTT 5 client on a raw connection, framed by mochi's
// codec: it publishes at QoS 1 with a content type and user properties.
type v5Publisher struct {
	c  net.Conn
	r  *bufio.Reader
	id uint16
}

func startV5Publisher(t testing.TB, addr, clientID string) *v5Publisher {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	connect := mqtt5.Connect{ClientID: clientID, CleanStart: true, KeepAlive: 60 * time.Second}
	if _, err := c.Write(connect.Encode()); err != nil {
		t.Fatal(err)
	}
	p := &v5Publisher{c: c, r: bufio.NewReader(c)}
	pk, err := mqtt5.ReadPacket(p.r, mqtt5.MaxControlPacket)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := mqtt5.ParseConnack(pk); err != nil || ack.Code != 0 {
		t.Fatalf("publisher CONNACK %+v, %v", ack, err)
	}
	return p
}

// publish sends payload to topic at QoS 1 with user property site and
// content type, and waits for the PUBACK.
func (p *v5Publisher) publish(t testing.TB, topic, site string, payload []byte) {
	t.Helper()
	p.id++
	pk := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish, Qos: 1}, ProtocolVersion: 5, PacketID: p.id,
		TopicName: topic, Payload: payload}
	pk.Properties.ContentType = "application/json"
	pk.Properties.User = []mp.UserProperty{{Key: "site", Val: site}}
	var buf bytes.Buffer
	if err := pk.PublishEncode(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := p.c.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	ack, err := mqtt5.ReadPacket(p.r, mqtt5.MaxControlPacket)
	if err != nil || ack.FixedHeader.Type != mp.Puback || ack.PacketID != p.id {
		t.Fatalf("PUBACK: %+v, %v", ack, err)
	}
}

// userProp is the value of user property key in m, or "".
func userProp(m *Message, key string) string {
	for p := mqttprops.New(m.Props); p.Next(); {
		if p.ID == mqttprops.PropUser {
			if k, v := mqttprops.Pair(p.Value); string(k) == key {
				return string(v)
			}
		}
	}
	return ""
}

// TestMQTT5_Mosquitto: at MQTT 5 the source announces its Receive Maximum,
// and mosquitto never has more unacknowledged messages out to it; every
// message carries its topic, content type and user properties; what was
// not acked is sent again on the next connection, what was acked is not.
func TestMQTT5_Mosquitto(t *testing.T) {
	for _, qos := range []byte{1, 2} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			t.Parallel()
			b := mosquitto.Start(t, mosquitto.DefaultInflight())
			const recvMax, n = 5, 40
			opts := MQTTOptions{Broker: b.URL(), ClientID: "eddy-v5", Topics: []string{"sensors/#"}, QoS: qos,
				ProtocolVersion: 5, ReceiveMaximum: recvMax}
			// The session first, then the messages: they wait at the broker
			// and come in one burst when the source connects again.
			src := NewMQTT(opts, testLogger(t))
			r := startSource(t, src)
			waitConnected(t, src)
			r.stop(t)
			pub := startV5Publisher(t, b.Addr(), "pub-v5")
			for i := range n {
				pub.publish(t, fmt.Sprintf("sensors/s%d", i%3), fmt.Sprintf("site-%d", i%2), []byte(fmt.Sprint(i)))
			}
			src = NewMQTT(opts, testLogger(t))
			r = startSource(t, src)
			st := src.(StatsReporter)
			await.True(t, 10*time.Second, "a window received", func() bool { return st.Stats().Received >= recvMax })
			if got := st.Stats().Received; got != recvMax {
				t.Fatalf("%d messages before the first ack, receive maximum %d", got, recvMax)
			}
			var got []Message
			for len(got) < n {
				batch := r.receive(t, 1, 10*time.Second)
				for i := range batch {
					m := &batch[i]
					k := len(got) + i
					if want := fmt.Sprintf("sensors/s%d", k%3); m.Topic != want || string(m.Payload) != fmt.Sprint(k) {
						t.Fatalf("message %d: %s %q, want %s %d", k, m.Topic, m.Payload, want, k)
					}
					if s := userProp(m, "site"); s != fmt.Sprintf("site-%d", k%2) {
						t.Errorf("message %d: user property site %q", k, s)
					}
				}
				AckAll(batch)
				got = append(got, batch...)
			}
			// Three more wait unacknowledged: stopped now, the broker
			// keeps them for the session's next connection.
			for i := range 3 {
				pub.publish(t, "sensors/late", "x", []byte(fmt.Sprint(n+i)))
			}
			rest := r.receive(t, 3, 10*time.Second)
			r.stop(t)
			src = NewMQTT(opts, testLogger(t))
			r = startSource(t, src)
			again := r.receive(t, len(rest), 10*time.Second)
			for i := range again {
				if string(again[i].Payload) != string(rest[i].Payload) || !again[i].Resumed {
					t.Errorf("re-sent message %d: %q resumed=%v, want %q resumed", i, again[i].Payload, again[i].Resumed, rest[i].Payload)
				}
			}
			AckAll(again)
		})
	}
}

// logBuffer is a slog text sink the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startEmbedded starts Eddy's embedded broker (mochi-mqtt) on a loopback
// port.
func startEmbedded(t testing.TB) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	b.Open()
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestMQTT5_SessionTakenOver: a second client with the source's client id
// takes the session over; the embedded broker's DISCONNECT (0x8E) is
// logged by name. mosquitto 2.0.11 closes the old connection without a
// DISCONNECT.
func TestMQTT5_SessionTakenOver(t *testing.T) {
	t.Parallel()
	b := startEmbedded(t)
	var lb logBuffer
	opts := MQTTOptions{Broker: b.URL(), ClientID: "eddy-taken", Topics: []string{"x"}, QoS: 1, ProtocolVersion: 5,
		ReconnectMin: time.Minute}
	src := NewMQTT(opts, slogTo(&lb))
	startSource(t, src)
	waitConnected(t, src)
	startV5Publisher(t, b.Addr(), "eddy-taken")
	await.True(t, 10*time.Second, "the takeover logged", func() bool { return strings.Contains(lb.String(), "session_taken_over") })
	if !strings.Contains(lb.String(), "another client connected with this client id") {
		t.Errorf("no explanation in:\n%s", lb.String())
	}
}

// TestMQTT5_Embedded: the embedded broker, as an external broker of
// another agent, delivers every message with its user properties. mochi
// drops a message for a subscriber whose Receive Maximum is used up
// (docs/upstream.md), so the window here is the default, above n.
func TestMQTT5_Embedded(t *testing.T) {
	t.Parallel()
	b := startEmbedded(t)
	const n = 20
	src := NewMQTT(MQTTOptions{Broker: b.URL(), ClientID: "eddy-emb", Topics: []string{"s/#"}, QoS: 1, ProtocolVersion: 5}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := startV5Publisher(t, b.Addr(), "pub-emb")
	for i := range n {
		pub.publish(t, "s/1", "north", []byte(fmt.Sprint(i)))
	}
	var got []Message
	for len(got) < n {
		batch := r.receive(t, 1, 10*time.Second)
		for i := range batch {
			if string(batch[i].Payload) != fmt.Sprint(len(got)+i) || userProp(&batch[i], "site") != "north" {
				t.Fatalf("message %d: %q site %q", len(got)+i, batch[i].Payload, userProp(&batch[i], "site"))
			}
		}
		AckAll(batch)
		got = append(got, batch...)
	}
}

// TestMQTT5_SessionExpiry: with SessionExpiry the broker drops the session
// that long after a disconnect; without, it keeps it.
func TestMQTT5_SessionExpiry(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t)
	for _, tt := range []struct {
		expiry  time.Duration
		present bool
	}{{time.Second, false}, {0, true}} {
		id := fmt.Sprintf("eddy-session-%v", tt.expiry)
		opts := MQTTOptions{Broker: b.URL(), ClientID: id, Topics: []string{"x"}, QoS: 1, ProtocolVersion: 5, SessionExpiry: tt.expiry}
		src := NewMQTT(opts, testLogger(t))
		r := startSource(t, src)
		waitConnected(t, src)
		r.stop(t)
		if tt.expiry > 0 {
			await.True(t, 10*time.Second, "the session expired", func() bool { return strings.Contains(b.Log(), "Expiring client "+id) })
		}
		var lb logBuffer
		src = NewMQTT(opts, slogTo(&lb))
		startSource(t, src)
		waitConnected(t, src)
		if got := !strings.Contains(lb.String(), "broker has no session"); got != tt.present {
			t.Errorf("session_expiry %v: session present %v, want %v:\n%s", tt.expiry, got, tt.present, lb.String())
		}
	}
}

// TestMQTT5_FallsBackTo311: RabbitMQ's MQTT plugin closes an MQTT 5
// CONNECT unanswered; the source speaks 3.1.1 to it, said once, and
// receives.
func TestMQTT5_FallsBackTo311(t *testing.T) {
	if !rabbitmq.Installed() {
		t.Fatal("RabbitMQ with its MQTT plugin is not installed (bash scripts/install-deps.sh)")
	}
	b := rabbitmq.Shared(t)
	var lb logBuffer
	src := NewMQTT(MQTTOptions{Broker: b.MQTTURL(), ClientID: "eddy-fallback", Topics: []string{"fb/#"}, QoS: 1,
		ProtocolVersion: 5, ReconnectMin: 10 * time.Millisecond}, slogTo(&lb))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, b.MQTTURL(), "pub-fallback")
	mustPublish(t, pub, "fb/1", 1, "1", "2")
	got := r.receive(t, 2, 10*time.Second)
	AckAll(got)
	if n := strings.Count(lb.String(), "does not speak MQTT 5"); n != 1 {
		t.Errorf("%d fallback lines, want 1:\n%s", n, lb.String())
	}
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestV5_PublishAliasesAndProperties: an MQTT 5 PUBLISH's topic alias is
// resolved for the connection, its content type and user properties are
// kept (the other properties are not), an alias the broker never set ends
// the connection, and a message whose properties exceed MaxProps is
// TooLarge.
func TestV5_PublishAliasesAndProperties(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := newCoalescingConn(a, 0)
	defer c.Close()
	var got []Message
	c.recv = publishReader{queue: func(m Message, _ byte) { got = append(got, m) }, wake: func() {}}
	c.in.v5 = true
	publish := func(topic string, alias uint16, user string) []byte {
		pk := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish, Qos: 1}, ProtocolVersion: 5, PacketID: 7, TopicName: topic, Payload: []byte("p")}
		pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = alias, alias != 0
		pk.Properties.MessageExpiryInterval = 60
		if user != "" {
			pk.Properties.User = []mp.UserProperty{{Key: "site", Val: user}}
			pk.Properties.ContentType = "text/plain"
		}
		var buf bytes.Buffer
		if err := pk.PublishEncode(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	big := strings.Repeat("x", MaxProps)
	go func() {
		for _, p := range [][]byte{publish("s/1", 3, "north"), publish("", 3, ""), publish("s/2", 0, big), publish("", 4, "")} {
			if _, err := b.Write(p); err != nil {
				return
			}
		}
	}()
	for range 3 {
		if err := c.readPacket(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.readPacket(); err != errMalformed {
		t.Errorf("an alias never set: %v, want errMalformed", err)
	}
	if len(got) != 3 {
		t.Fatalf("%d messages, want 3", len(got))
	}
	if got[0].Topic != "s/1" || got[1].Topic != "s/1" || got[2].Topic != "s/2" {
		t.Errorf("topics %q %q %q, want s/1 s/1 s/2", got[0].Topic, got[1].Topic, got[2].Topic)
	}
	if userProp(&got[0], "site") != "north" || got[1].Props != nil || got[0].ackID != 7 {
		t.Errorf("props %q, %q; ack id %d", got[0].Props, got[1].Props, got[0].ackID)
	}
	for p := mqttprops.New(got[0].Props); p.Next(); {
		if p.ID != mqttprops.PropUser && p.ID != mqttprops.PropContentType {
			t.Errorf("property %#x kept", p.ID)
		}
	}
	if !got[2].TooLarge || got[2].Props != nil {
		t.Errorf("properties over MaxProps: TooLarge %v, props %d bytes", got[2].TooLarge, len(got[2].Props))
	}
}

// TestMQTT5_SharedSubscription: at MQTT 5 both forms of shared
// subscription reach mosquitto as the standard writes them: the source's
// own connections (SharedMQTT, $share/GROUP/FILTER per connection) and a
// $share/GROUP/FILTER topic written in the configuration; together they
// receive each message once.
func TestMQTT5_SharedSubscription(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t)
	opts := MQTTOptions{Broker: b.URL(), ClientID: "eddy-shared-v5", Topics: []string{"s/#"}, QoS: 1, ProtocolVersion: 5}
	shared := NewSharedMQTT(opts, SharedOptions{Connections: 2, Group: "g"}, testLogger(t))
	r := startSource(t, shared)
	// A third member of the group, subscribed by the filter itself.
	third := NewMQTT(MQTTOptions{Broker: b.URL(), ClientID: "eddy-shared-v5-third", Topics: []string{"$share/g/s/#"}, QoS: 1, ProtocolVersion: 5}, testLogger(t))
	r3 := startSource(t, third)
	waitConnected(t, shared)
	waitConnected(t, third)
	const n = 300
	pub := startV5Publisher(t, b.Addr(), "pub-shared")
	for i := range n {
		pub.publish(t, "s/1", "x", []byte(fmt.Sprint(i)))
	}
	seen := map[string]int{}
	await.True(t, 20*time.Second, "every message once over the group", func() bool {
		for _, q := range []*runningSource{r, r3} {
			select {
			case batch := <-q.out:
				for _, m := range batch {
					seen[string(m.Payload)]++
				}
				AckAll(batch)
			default:
			}
		}
		return len(seen) == n
	})
	for p, c := range seen {
		if c != 1 {
			t.Errorf("message %s received %d times", p, c)
		}
	}
	if third.(StatsReporter).Stats().Received == 0 || shared.Stats().Received == 0 {
		t.Errorf("the group did not share: %d to the source's connections, %d to the third member", shared.Stats().Received, third.(StatsReporter).Stats().Received)
	}
}

// TestV5_PublishDoesNotAllocate: reading an MQTT 5 PUBLISH with a topic
// alias, a content type and user properties allocates nothing per message
// (the topic is interned, payload and properties go to the arena).
func TestV5_PublishDoesNotAllocate(t *testing.T) {
	c := &coalescingConn{}
	c.in.v5 = true
	c.recv = publishReader{queue: func(Message, byte) {}, wake: func() {}}
	pk := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish, Qos: 1}, ProtocolVersion: 5, PacketID: 7, TopicName: "sensors/a",
		Payload: []byte(`{"temp":21.5}`)}
	pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = 2, true
	pk.Properties.ContentType = "application/json"
	pk.Properties.User = []mp.UserProperty{{Key: "site", Val: "north"}}
	var buf bytes.Buffer
	if err := pk.PublishEncode(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	body := b[2:] // one-byte remaining length: a short packet
	if err := c.publish(b[0], body, false); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10000, func() { _ = c.publish(b[0], body, false) }); n != 0 {
		t.Errorf("%.2f allocations per message, want 0", n)
	}
}

// TestSimulator_MQTT5: the simulator publishes at MQTT 5, at QoS 1 and 2,
// each reading with its content type and the user property "sensor".
func TestSimulator_MQTT5(t *testing.T) {
	for _, qos := range []byte{1, 2} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			t.Parallel()
			b := startEmbedded(t)
			src := NewMQTT(MQTTOptions{Broker: b.URL(), ClientID: "eddy-sim-sub", Topics: []string{"sensors/#"}, QoS: 1, ProtocolVersion: 5}, testLogger(t))
			r := startSource(t, src)
			waitConnected(t, src)
			const n = 40
			sim := NewSimulator(SimulatorOptions{Broker: b.URL(), Devices: 4, Rate: 1000, MaxReadings: n, QoS: qos, ProtocolVersion: 5}, testLogger(t))
			if err := sim.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := r.receive(t, n, 10*time.Second)
			AckAll(got)
			for i := range got {
				m := &got[i]
				if want := strings.Split(m.Topic, "/")[1]; userProp(m, "sensor") != want {
					t.Errorf("message %d on %s: user property sensor %q", i, m.Topic, userProp(m, "sensor"))
				}
			}
		})
	}
}
