package rabbitmq

import (
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// TestBroker_DowngradesQoS2: the broker starts, answers a QoS 2 PUBLISH
// with PUBACK (RabbitMQ 3.10's MQTT plugin has no QoS 2), delivers the
// message to a subscriber at QoS 1, and stops listening when stopped.
func TestBroker_DowngradesQoS2(t *testing.T) {
	b := Start(t)
	sub := connect(t, b, "sub")
	sp := packets.NewControlPacket(packets.Subscribe).(*packets.SubscribePacket)
	sp.MessageID, sp.Topics, sp.Qoss = 1, []string{"t/#"}, []byte{2}
	if err := sp.Write(sub); err != nil {
		t.Fatal(err)
	}
	suback, ok := read(t, sub).(*packets.SubackPacket)
	if !ok || len(suback.ReturnCodes) != 1 || suback.ReturnCodes[0] != 1 {
		t.Fatalf("SUBSCRIBE at QoS 2 answered %v; want SUBACK granting QoS 1", suback)
	}
	pub := connect(t, b, "pub")
	pp := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	pp.Qos, pp.MessageID, pp.TopicName, pp.Payload = 2, 7, "t/x", []byte("hello")
	if err := pp.Write(pub); err != nil {
		t.Fatal(err)
	}
	if ack, ok := read(t, pub).(*packets.PubackPacket); !ok || ack.MessageID != 7 {
		t.Fatalf("QoS 2 PUBLISH answered %v; want PUBACK 7", ack)
	}
	got, ok := read(t, sub).(*packets.PublishPacket)
	if !ok || string(got.Payload) != "hello" || got.Qos != 1 {
		t.Fatalf("subscriber got %v; want the message at QoS 1", got)
	}
	b.Stop()
	if c, err := net.Dial("tcp", b.Addr()); err == nil {
		c.Close()
		t.Fatal("broker still listening after Stop")
	}
}

func connect(t *testing.T, b *Broker, id string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.CleanSession, cp.ClientIdentifier, cp.Keepalive = "MQTT", 4, true, id, 30
	if err := cp.Write(c); err != nil {
		t.Fatal(err)
	}
	if ack, ok := read(t, c).(*packets.ConnackPacket); !ok || ack.ReturnCode != 0 {
		t.Fatalf("CONNECT answered %v", ack)
	}
	return c
}

func read(t *testing.T, c net.Conn) packets.ControlPacket {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	p, err := packets.ReadPacket(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
