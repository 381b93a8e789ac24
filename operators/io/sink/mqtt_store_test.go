package sink

import (
	"slices"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

func TestCopyingStore(t *testing.T) {
	s := newCopyingStore()
	pub := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	pub.Qos, pub.MessageID, pub.TopicName, pub.Payload = 1, 7, "eddy/t", []byte(`{"id":"x"}`)
	s.Put("o.7", pub)
	pub.Payload[0] = '!' // the caller's buffer changes after Put

	got, ok := s.Get("o.7").(*packets.PublishPacket)
	if !ok {
		t.Fatalf("Get returned %T, want *packets.PublishPacket", s.Get("o.7"))
	}
	if got == pub {
		t.Fatal("Get returned the packet given to Put; want a copy")
	}
	if got.TopicName != "eddy/t" || got.MessageID != 7 || got.Qos != 1 || string(got.Payload) != `{"id":"x"}` {
		t.Fatalf("Get = %v %q, want the packet as Put", got, got.Payload)
	}
	got.Dup = true // as paho's resume does
	if again := s.Get("o.7").(*packets.PublishPacket); again.Dup {
		t.Fatal("changing one copy changed the stored packet")
	}
	if keys := s.All(); !slices.Equal(keys, []string{"o.7"}) {
		t.Fatalf("All = %v", keys)
	}
	s.Del("o.7")
	if s.Get("o.7") != nil || len(s.All()) != 0 {
		t.Fatal("Del left the packet")
	}
	s.Put("o.8", pub)
	s.Reset()
	if len(s.All()) != 0 {
		t.Fatal("Reset left packets")
	}
}
