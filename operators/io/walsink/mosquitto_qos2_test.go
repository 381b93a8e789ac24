package walsink

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestMosquitto_QoS2Behaviour pins the broker behaviour the window and the
// re-publish of unreleased flows rest on, against the real mosquitto with
// stock settings (20 in flight):
//   - over its limit it answers a QoS 2 PUBLISH with PUBREC, drops the
//     message and keeps the connection: no sign a 3.1.1 client can read;
//   - a PUBLISH re-sent (DUP, same id) after a reconnect, before any
//     PUBREL, of a message it kept is answered PUBREC and not delivered
//     twice; one it dropped is delivered when re-sent within the limit.
func TestMosquitto_QoS2Behaviour(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	sub := rawConnect(t, b, "sub", true)
	sp := packets.NewControlPacket(packets.Subscribe).(*packets.SubscribePacket)
	sp.MessageID, sp.Topics, sp.Qoss = 1, []string{"t/#"}, []byte{2}
	must(sp.Write(sub))
	rawRead(t, sub) // SUBACK
	got := make(chan string, 100)
	go func() {
		for {
			p, err := packets.ReadPacket(sub)
			if err != nil {
				return
			}
			switch p := p.(type) {
			case *packets.PublishPacket:
				got <- string(p.Payload)
				r := packets.NewControlPacket(packets.Pubrec).(*packets.PubrecPacket)
				r.MessageID = p.MessageID
				_ = r.Write(sub)
			case *packets.PubrelPacket:
				r := packets.NewControlPacket(packets.Pubcomp).(*packets.PubcompPacket)
				r.MessageID = p.MessageID
				_ = r.Write(sub)
			}
		}
	}()
	publish := func(c net.Conn, id uint16, dup bool) {
		pp := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		pp.Qos, pp.Dup, pp.MessageID, pp.TopicName, pp.Payload = 2, dup, id, "t/x", []byte(strconv.Itoa(int(id)))
		must(pp.Write(c))
	}
	release := func(c net.Conn, id uint16) {
		r := packets.NewControlPacket(packets.Pubrel).(*packets.PubrelPacket)
		r.MessageID = id
		must(r.Write(c))
	}
	// 25 PUBLISHes at once: 25 PUBRECs, the connection stays.
	pub := rawConnect(t, b, "pub", false)
	for id := uint16(1); id <= 25; id++ {
		publish(pub, id, false)
	}
	for id := uint16(1); id <= 25; id++ {
		if r, ok := rawRead(t, pub).(*packets.PubrecPacket); !ok || r.MessageID != id {
			t.Fatalf("PUBLISH %d answered %v", id, r)
		}
	}
	pub.Close()
	// Reconnect; 1..20 were kept, 21..25 dropped. Re-send 1..20 and
	// release them: each delivered once. Then re-send 21..25 (within the
	// limit now) and release them: delivered now.
	pub = rawConnect(t, b, "pub", false)
	for _, ids := range [][2]uint16{{1, 20}, {21, 25}} {
		for id := ids[0]; id <= ids[1]; id++ {
			publish(pub, id, true)
		}
		for id := ids[0]; id <= ids[1]; id++ {
			if _, ok := rawRead(t, pub).(*packets.PubrecPacket); !ok {
				t.Fatalf("re-sent PUBLISH %d not answered PUBREC", id)
			}
			release(pub, id)
		}
		for id := ids[0]; id <= ids[1]; id++ {
			if _, ok := rawRead(t, pub).(*packets.PubcompPacket); !ok {
				t.Fatalf("PUBREL %d not answered PUBCOMP", id)
			}
		}
	}
	seen := map[string]int{}
	await.Until(t, 10*time.Second, func() error {
		for len(seen) < 25 {
			select {
			case m := <-got:
				seen[m]++
			default:
				return fmt.Errorf("subscriber got %d of 25: %v", len(seen), seen)
			}
		}
		return nil
	})
	if await.Holds(300*time.Millisecond, func() bool { return len(got) > 0 }) {
		t.Errorf("a message delivered twice: %v then %q", seen, <-got)
	}
	for m, n := range seen {
		if n != 1 {
			t.Errorf("message %s delivered %d times", m, n)
		}
	}
}

func rawConnect(t *testing.T, b *mosquitto.Broker, id string, clean bool) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.CleanSession, cp.ClientIdentifier, cp.Keepalive = "MQTT", 4, clean, id, 30
	must(cp.Write(c))
	if ack, ok := rawRead(t, c).(*packets.ConnackPacket); !ok || ack.ReturnCode != 0 {
		t.Fatalf("CONNECT answered %v", ack)
	}
	return c
}

func rawRead(t *testing.T, c net.Conn) packets.ControlPacket {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	p, err := packets.ReadPacket(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
