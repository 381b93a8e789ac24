package sparkplug

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/state/vfs"
)

// received is a message the host application saw.
type received struct {
	topic string
	p     Payload
}

// edge drives a Node over a real MQTT connection, as a sink would: the
// will from Connect, the subscriptions, and every action in order.
type edge struct {
	t      *testing.T
	mu     sync.Mutex // the Node is not safe for concurrent use
	n      *Node
	client paho.Client
	conn   net.Conn
}

func (e *edge) do(acts []Action) {
	for _, a := range acts {
		switch a.Kind {
		case Publish:
			// paho keeps the slice until sent: the payload is the Node's
			// buffer, valid only until its next call.
			tok := e.client.Publish(a.Topic, a.QoS, a.Retain, append([]byte(nil), a.Payload...))
			if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				e.t.Errorf("publish %s: %v", a.Topic, tok.Error())
			}
		case Disconnect:
			go e.client.Disconnect(0)
		}
	}
}

func (e *edge) connect(brokerURL, bdSeqPath string) {
	bd, err := NextBdSeq(vfs.Default, bdSeqPath)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	will := e.n.Connect(bd, time.Now().UnixMilli())
	e.mu.Unlock()
	o := paho.NewClientOptions().AddBroker(brokerURL).SetClientID("gw-7").SetCleanSession(true).SetAutoReconnect(false).
		SetBinaryWill(will.Topic, will.Payload, will.QoS, will.Retain)
	o.SetCustomOpenConnectionFn(func(uri *url.URL, _ paho.ClientOptions) (net.Conn, error) {
		c, err := net.Dial("tcp", uri.Host)
		e.conn = c
		return c, err
	})
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		e.mu.Lock()
		defer e.mu.Unlock()
		now := time.Now().UnixMilli()
		var acts []Action
		var err error
		if t, _ := ParseTopic(m.Topic()); t.Type == STATE {
			acts, err = e.n.HostState(m.Payload(), now)
		} else {
			acts, err = e.n.Command(m.Payload(), now)
		}
		if err != nil {
			e.t.Errorf("%s: %v", m.Topic(), err)
		}
		e.do(acts)
	})
	o.SetOnConnectHandler(func(c paho.Client) {
		for _, topic := range e.n.Subscriptions() {
			if tok := c.Subscribe(topic, 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				e.t.Errorf("subscribe %s: %v", topic, tok.Error())
			}
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.do(e.n.Connected(time.Now().UnixMilli()))
	})
	e.client = paho.NewClient(o)
	if tok := e.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		e.t.Fatalf("connect: %v", tok.Error())
	}
}

// TestBroker_SessionThroughMosquitto: through a real broker, a host
// application sees the births only after its STATE online, a DBIRTH before
// the first DDATA, a rebirth on its NCMD, and, when the edge's connection
// dies without a DISCONNECT, the will: an NDEATH with the bdSeq of the
// NBIRTH. The next connection's bdSeq is one more.
func TestBroker_SessionThroughMosquitto(t *testing.T) {
	b := mosquitto.Start(t)
	host := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("scada-1").SetAutoReconnect(false))
	if tok := host.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer host.Disconnect(0)
	got := make(chan received, 100)
	if tok := host.Subscribe("spBv1.0/plant1/#", 1, func(_ paho.Client, m paho.Message) {
		var p Payload
		if err := DecodePayload(append([]byte(nil), m.Payload()...), &p); err != nil {
			t.Errorf("%s: %v", m.Topic(), err)
		}
		got <- received{m.Topic(), p}
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	next := func(wantTopic string) Payload {
		t.Helper()
		select {
		case r := <-got:
			if r.topic != "spBv1.0/plant1/"+wantTopic {
				t.Fatalf("host got %s, want %s", r.topic, wantTopic)
			}
			return r.p
		case <-time.After(20 * time.Second):
			t.Fatalf("host got nothing, want %s", wantTopic)
		}
		return Payload{}
	}
	bdSeqOf := func(p Payload) string {
		for _, m := range p.Metrics {
			if string(m.Name) == BdSeqMetric {
				return fmt.Sprint(m.Value.Bits)
			}
		}
		return "none"
	}

	n, err := NewNode(Config{Group: "plant1", Node: "gw-7", PrimaryHost: "scada-1"})
	if err != nil {
		t.Fatal(err)
	}
	e := &edge{t: t, n: n}
	bdPath := filepath.Join(t.TempDir(), "sparkplug-bdseq")
	e.connect(b.URL(), bdPath)
	// The host comes online after the edge connected: the births follow.
	state := fmt.Appendf(nil, `{"online":true,"timestamp":%d}`, time.Now().UnixMilli())
	if tok := host.Publish("spBv1.0/STATE/scada-1", 1, true, state); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	if p := next("NBIRTH/gw-7"); bdSeqOf(p) != "0" || p.Seq != 0 {
		t.Fatalf("NBIRTH bdSeq %s seq %d", bdSeqOf(p), p.Seq)
	}
	e.mu.Lock()
	acts, ok := n.Result([]byte("sensor-3"), names, values, 60000, false, time.Now().UnixMilli())
	if !ok {
		t.Fatal("result refused after the births")
	}
	e.do(acts)
	e.mu.Unlock()
	next("DBIRTH/gw-7/sensor-3")
	if p := next("DDATA/gw-7/sensor-3"); p.Seq != 2 || len(p.Metrics) != 4 {
		t.Fatalf("DDATA %+v", p)
	}
	rebirth := AppendPayload(nil, &Payload{Timestamp: uint64(time.Now().UnixMilli()), HasTimestamp: true,
		Metrics: []Metric{{Name: []byte(RebirthMetric), Datatype: TypeBoolean, Value: Bool(true)}}})
	if tok := host.Publish("spBv1.0/plant1/NCMD/gw-7", 0, false, rebirth); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	next("NCMD/gw-7") // the host's own command, echoed by its subscription
	if p := next("NBIRTH/gw-7"); bdSeqOf(p) != "0" || p.Seq != 0 {
		t.Fatalf("rebirth NBIRTH bdSeq %s seq %d", bdSeqOf(p), p.Seq)
	}
	next("DBIRTH/gw-7/sensor-3")

	// The connection dies without a DISCONNECT: the broker publishes the
	// will, the NDEATH of the same bdSeq.
	e.conn.Close()
	if p := next("NDEATH/gw-7"); bdSeqOf(p) != "0" || p.HasSeq {
		t.Fatalf("NDEATH bdSeq %s, seq present %v", bdSeqOf(p), p.HasSeq)
	}
	e.client.Disconnect(0)
	e.mu.Lock()
	n.Disconnected()
	e.mu.Unlock()
	// Reconnect: the retained STATE says online, the births follow with
	// the next bdSeq, and the known device is reborn.
	e.connect(b.URL(), bdPath)
	defer e.client.Disconnect(0)
	if p := next("NBIRTH/gw-7"); bdSeqOf(p) != "1" {
		t.Fatalf("NBIRTH after reconnect: bdSeq %s, want 1", bdSeqOf(p))
	}
	next("DBIRTH/gw-7/sensor-3")
}
