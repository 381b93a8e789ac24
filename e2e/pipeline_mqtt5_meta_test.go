package e2e

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/scripts/mqttjs"
)

// TestMQTT5_UserPropertiesFromMQTTJS: MQTT.js publishes readings at MQTT 5
// through mosquitto with a user property "site" and a content type; the
// pipeline keeps one site (filter on meta.user_properties.site and
// meta.content_type) and keys by site and topic. The agent is SIGKILLed
// after it logged the readings and before any checkpoint, so the restarted
// agent computes every window from the ingest log: the properties come
// back from it.
func TestMQTT5_UserPropertiesFromMQTTJS(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg := `
agent {
  device_id = "meta"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker = "` + b.URL() + `"
  topics = ["sensors/+/telemetry"]
  qos    = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}
sink "file" "out" { path = "` + out + `" }
pipeline "north" {
  from   = source.mqtt.sensors
  filter = meta.user_properties.site == "north" && meta.content_type == "application/json"
  key    = "${meta.user_properties.site}:${meta.topic}"
  window "tumbling" { size = "10s" }
  aggregate {
    n = count()
  }
  to = [sink.file.out]
}
checkpoint { interval = "1h" }
`
	const readings = 40
	base := int64(1_700_000_000_000)
	var msgs []mqttjs.Message
	for i := range readings {
		site := "north"
		if i%2 == 1 {
			site = "south"
		}
		msgs = append(msgs, mqttjs.Message{Topic: fmt.Sprintf("sensors/d%d/telemetry", i%4), QoS: 1, ContentType: "application/json",
			Payload: fmt.Sprintf(`{"ts":%d,"v":%d}`, base+int64(i)*100, i), UserProperties: map[string]string{"site": site}})
	}

	ag := startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	mqttjs.Publish(t, b.URL(), "mqttjs-sensors", msgs)
	await.True(t, 30*time.Second, "every reading in", func() bool {
		st := ag.status(t)
		return len(st) == 1 && st[0].ReadingsIn == readings
	})
	ag.kill()

	ag = startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	// A reading far ahead moves the watermark past every window.
	mqttjs.Publish(t, b.URL(), "mqttjs-sensors", []mqttjs.Message{{Topic: "sensors/flush/telemetry", QoS: 1,
		ContentType: "application/json", UserProperties: map[string]string{"site": "north"},
		Payload: fmt.Sprintf(`{"ts":%d}`, base+3_600_000)}})
	await.True(t, 30*time.Second, "the north readings counted", func() bool { return sumOf(out, "n") >= readings/2 })
	ag.stop(syscall.SIGTERM, 20*time.Second)

	got := map[string]float64{}
	for _, r := range readOutputsIfAny(out) {
		k, _ := r["key"].(string)
		n, _ := r["n"].(float64)
		got[k] += n
	}
	want := map[string]float64{"north:sensors/d0/telemetry": readings / 4, "north:sensors/d2/telemetry": readings / 4}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("key %q: %v readings, want %v (all: %v)", k, got[k], n, got)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected key %q (all: %v)", k, got)
		}
	}
}
