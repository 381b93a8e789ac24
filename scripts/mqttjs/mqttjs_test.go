package mqttjs

import (
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestSubscribe_SeesProperties: what MQTT.js publishes to mosquitto at MQTT
// 5, another MQTT.js client subscribed to a filter receives with its user
// properties, content type and Message Expiry Interval; a message without
// them comes without (a QoS 1 message may overtake a QoS 2 one).
func TestSubscribe_SeesProperties(t *testing.T) {
	b := mosquitto.Start(t)
	sub := Subscribe(t, b.URL(), "sub", "r/#")
	Publish(t, b.URL(), "pub", []Message{
		{Topic: "r/1", Payload: `{"id":"a"}`, QoS: 2, UserProperties: map[string]string{"id": "a"}, ContentType: "application/json"},
		{Topic: "r/2", Payload: "plain", QoS: 1},
		{Topic: "other", Payload: "not subscribed", QoS: 1},
	})
	got := sub.Await(2, 20*time.Second)
	byTopic := map[string]Received{}
	for _, m := range got {
		byTopic[m.Topic] = m
	}
	if len(got) != 2 || len(byTopic) != 2 {
		t.Fatalf("received %+v, want the 2 messages on r/#", got)
	}
	if m := byTopic["r/1"]; m.Payload != `{"id":"a"}` || m.QoS != 2 || m.UserProperties["id"] != "a" || m.ContentType != "application/json" {
		t.Errorf("r/1: %+v, want QoS 2 with id a and application/json", m)
	}
	if m := byTopic["r/2"]; m.Payload != "plain" || m.QoS != 1 || m.UserProperties != nil || m.ContentType != "" || m.MessageExpiryInterval != 0 {
		t.Errorf("r/2: %+v, want QoS 1 without properties", m)
	}
}
