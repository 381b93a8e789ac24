package faultbroker

import (
	"bufio"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/eddy-edge/eddy/scripts/await"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"+/+/c", "x/y/c", true},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"sensors/+/telemetry", "sensors/7/telemetry", true},
		{"sensors/+/telemetry", "sensors/7/status", false},
		{"a", "a/b", false},
	} {
		if got := Match(c.filter, c.topic); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.filter, c.topic, got, c.want)
		}
	}
}

func start(t *testing.T, o Options) *Broker {
	t.Helper()
	b, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

type got struct {
	payload string
	dup     bool
}

// subscriber connects a paho client with a persistent session that
// records what it receives (paho acks each after the handler).
func subscriber(t *testing.T, url, id string, mu *sync.Mutex, into *[]got) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(false).SetAutoReconnect(false)
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		mu.Lock()
		*into = append(*into, got{string(m.Payload()), m.Duplicate()})
		mu.Unlock()
	})
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	if tok := c.Subscribe("s/+/t", 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	return c
}

// TestBroker_ResendsAckedBlocks: a client publishes 100 messages, a
// subscriber acks them; on its reconnect the broker re-sends the last 30
// with DUP, then the first 10 without, then what is new.
func TestBroker_ResendsAckedBlocks(t *testing.T) {
	before := runtime.NumGoroutine()
	b := start(t, Options{Inflight: 10})
	var mu sync.Mutex
	var msgs []got
	sub := subscriber(t, b.URL(), "sub", &mu, &msgs)

	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	for i := range 100 {
		pub.Publish("s/"+strconv.Itoa(i%3)+"/t", 1, false, strconv.Itoa(i))
	}
	pub.Publish("other", 1, false, "not routed").Wait()
	await.True(t, 10*time.Second, `b.SessionStats("sub").Acked == 100`, func() bool { return b.SessionStats("sub").Acked == 100 })
	sub.Disconnect(100)
	pub.Disconnect(100)
	// Published while the old connection is still up, "new" would be in
	// flight on it and come again with DUP.
	await.True(t, 5*time.Second, `!b.Connected("sub")`, func() bool { return !b.Connected("sub") })

	b.ResendOnReconnect("sub", Resend{Last: 30, Dup: true})
	b.ResendOnReconnect("sub", Resend{From: 1, Count: 10})
	b.Publish("s/x/t", []byte("new"))
	mu.Lock()
	msgs = nil
	mu.Unlock()
	sub = subscriber(t, b.URL(), "sub", &mu, &msgs)
	defer sub.Disconnect(100)
	await.True(t, 10*time.Second, `len(msgs) == 41`, func() bool { mu.Lock(); defer mu.Unlock(); return len(msgs) == 41 })
	mu.Lock()
	defer mu.Unlock()
	for i, m := range msgs {
		want := got{"new", false}
		switch {
		case i < 30:
			want = got{strconv.Itoa(70 + i), true}
		case i < 40:
			want = got{strconv.Itoa(i - 30), false}
		}
		if m != want {
			t.Fatalf("message %d is %+v, want %+v", i, m, want)
		}
	}
	if st := b.SessionStats("sub"); st.Delivered != 101 || st.Resent != 40 {
		t.Fatalf("stats %+v, want 101 delivered, 40 re-sent", st)
	}
	sub.Disconnect(100)
	b.Stop()
	await.True(t, 5*time.Second, `runtime.NumGoroutine() <= before+2`, func() bool { return runtime.NumGoroutine() <= before+2 }) // paho's last goroutines may linger briefly
}

// rawClient connects with CONNECT and SUBSCRIBE written by hand and returns
// the connection and a reader of its packets.
func rawClient(t *testing.T, b *Broker, id string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.ClientIdentifier, cp.Keepalive = "MQTT", 4, id, 60
	sp := packets.NewControlPacket(packets.Subscribe).(*packets.SubscribePacket)
	sp.MessageID, sp.Topics, sp.Qoss = 1, []string{"#"}, []byte{0}
	for _, p := range []packets.ControlPacket{cp, sp} {
		if err := p.Write(nc); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(nc)
	for _, want := range []string{"CONNACK", "SUBACK"} {
		p := read(t, nc, r)
		if p.String()[:len(want)] != want {
			t.Fatalf("got %s, want %s", p, want)
		}
	}
	return nc, r
}

func read(t *testing.T, nc net.Conn, r *bufio.Reader) packets.ControlPacket {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, err := packets.ReadPacket(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBroker_PingDelayAndSilence: a delayed PINGRESP comes after PUBLISH
// packets sent meanwhile; a silent session gets nothing until it is
// heard again.
func TestBroker_PingDelayAndSilence(t *testing.T) {
	b := start(t, Options{})
	nc, r := rawClient(t, b, "raw")
	b.SetPingDelay(300 * time.Millisecond)
	sent := time.Now()
	if err := packets.NewControlPacket(packets.Pingreq).Write(nc); err != nil {
		t.Fatal(err)
	}
	b.Publish("x", []byte("during the delay"))
	if p, ok := read(t, nc, r).(*packets.PublishPacket); !ok || string(p.Payload) != "during the delay" {
		t.Fatalf("got %v, want the PUBLISH first", p)
	}
	if _, ok := read(t, nc, r).(*packets.PingrespPacket); !ok {
		t.Fatal("want PINGRESP")
	}
	if d := time.Since(sent); d < 300*time.Millisecond {
		t.Fatalf("PINGRESP after %v, want at least 300ms", d)
	}

	b.SetPingDelay(0)
	b.SetSilent("raw", true)
	b.Publish("x", []byte("held"))
	_ = packets.NewControlPacket(packets.Pingreq).Write(nc)
	_ = nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("a silent broker sent something")
	}
	b.SetSilent("raw", false)
	if p, ok := read(t, nc, r).(*packets.PublishPacket); !ok || string(p.Payload) != "held" {
		t.Fatalf("got %v, want the held PUBLISH", p)
	}
	if !b.CloseClient("raw") {
		t.Fatal("CloseClient: no connection")
	}
	if _, err := packets.ReadPacket(r); err == nil {
		t.Fatal("connection still open after CloseClient")
	}
	await.True(t, 5*time.Second, `!b.Connected("raw")`, func() bool { return !b.Connected("raw") })
}

// TestBroker_QoS2FromClient: a QoS 2 PUBLISH is answered with PUBREC and
// held, also across a reconnect; a repeat of the held id is answered again
// and routed no second time; the PUBREL routes it once and gets PUBCOMP.
func TestBroker_QoS2FromClient(t *testing.T) {
	b := start(t, Options{})
	nc, r := rawClient(t, b, "raw") // subscribed to # at QoS 0: sees its own messages
	publish := func(id uint16, payload string, dup bool) {
		t.Helper()
		pp := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		pp.Qos, pp.Dup, pp.MessageID, pp.TopicName, pp.Payload = 2, dup, id, "up/x", []byte(payload)
		if err := pp.Write(nc); err != nil {
			t.Fatal(err)
		}
		if p, ok := read(t, nc, r).(*packets.PubrecPacket); !ok || p.MessageID != id {
			t.Fatalf("got %v, want PUBREC %d", p, id)
		}
	}
	release := func(id uint16, payload string) {
		t.Helper()
		rel := packets.NewControlPacket(packets.Pubrel).(*packets.PubrelPacket)
		rel.MessageID = id
		if err := rel.Write(nc); err != nil {
			t.Fatal(err)
		}
		// The PUBCOMP and the routed message, in either order; then a
		// PINGRESP and nothing before it: no second delivery.
		var comp, msg bool
		for range 2 {
			switch p := read(t, nc, r).(type) {
			case *packets.PubcompPacket:
				comp = p.MessageID == id
			case *packets.PublishPacket:
				msg = string(p.Payload) == payload
			default:
				t.Fatalf("got %v", p)
			}
		}
		if !comp || !msg {
			t.Fatalf("PUBCOMP %d %v, message %q %v", id, comp, payload, msg)
		}
		if err := packets.NewControlPacket(packets.Pingreq).Write(nc); err != nil {
			t.Fatal(err)
		}
		if p, ok := read(t, nc, r).(*packets.PingrespPacket); !ok {
			t.Fatalf("got %v, want PINGRESP", p)
		}
	}
	publish(7, "a", false)
	publish(7, "a", true)
	release(7, "a")
	publish(8, "b", false)
	nc.Close()
	nc, r = rawClient(t, b, "raw")
	publish(8, "b", true)
	release(8, "b")
	if st := b.SessionStats("raw"); st.Connects != 2 {
		t.Fatalf("stats %+v, want 2 connects", st)
	}
}
