package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestMQTTSource_OversizedDeadLettered: through a real mosquitto into the
// real binary, a sensor publishes readings at QoS 1 with a message over the
// source's max_message_size among them: that message is acknowledged,
// dead-lettered once with reason too_large and its payload cut, and every
// reading after it arrives (it never blocks the topic).
func TestMQTTSource_OversizedDeadLettered(t *testing.T) {
	b := mosquitto.Start(t)
	dir := t.TempDir()
	ag := startAgent(t, dir, `
agent {
  device_id = "big"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker           = "`+b.URL()+`"
  topics           = ["sensors/+/telemetry"]
  qos              = 1
  max_message_size = "2KiB"
}
sink "file" "dead" { path = "%DIR%/dead.jsonl" }
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "200ms"
  }
  aggregate { n = count() }
  to          = [sink.file.out]
  dead_letter = sink.file.dead
}
`)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sensor-big"))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	const before, after = 100, 100
	publish := func(payload string) {
		if tok := c.Publish("sensors/d1/telemetry", 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	for i := range before {
		publish(fmt.Sprintf(`{"device":"d1","seq":%d}`, i))
	}
	publish(`{"device":"d1","blob":"` + strings.Repeat("x", 64<<10) + `"}`)
	for i := range after {
		publish(fmt.Sprintf(`{"device":"d1","seq":%d}`, before+i))
	}
	in := func() uint64 {
		var n uint64
		for _, p := range ag.status(t) {
			n += p.ReadingsIn
		}
		return n
	}
	await.True(t, 30*time.Second, `in() == before+1+after`, func() bool { return in() == before+1+after })
	deadPath := filepath.Join(dir, "dead.jsonl")
	await.True(t, 30*time.Second, `len(b) > 0`, func() bool { b, _ := os.ReadFile(deadPath); return len(b) > 0 })
	dead, err := os.ReadFile(deadPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(dead)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"too_large"`) {
		t.Fatalf("dead letters:\n%s\nwant one with reason too_large", dead)
	}
	if len(lines[0]) > 4<<10 {
		t.Errorf("the dead letter is %d bytes: its payload was not cut", len(lines[0]))
	}
	var dl uint64
	for _, p := range ag.status(t) {
		dl += p.DeadLettered
	}
	if dl != 1 {
		t.Errorf("dead_lettered = %d, want 1", dl)
	}
}

// TestEmbeddedBroker_OversizedCostsItsSenderOnly runs the real binary with
// its embedded broker: one sensor keeps sending a QoS 1 message over
// max_message_size (re-sent on every reconnect) while 10 others publish
// 1,000 readings each. The pipeline counts the 10,000 readings exactly,
// none of the 10 is disconnected, and the offender's refusals are counted
// in eddy_broker_too_large_total.
func TestEmbeddedBroker_OversizedCostsItsSenderOnly(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	ag := startAgent(t, dir, `
agent {
  device_id = "flood"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker {
  listen           = "`+brokerAddr+`"
  max_message_size = "1KiB"
}
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "1s"
  }
  aggregate { n = count() }
  to = [sink.file.out]
}
`)
	// The offender reconnects itself, each time with a clean session: paho
	// 1.5.1's automatic reconnect resumes the stored in-flight PUBLISH by
	// setting DUP on the packet while the new connection's writer may be
	// writing it (a data race inside paho, seen by the race detector). Its
	// loop publishes again anyway; the sensors keep their sessions.
	connect := func(id string, lost *atomic.Int64) paho.Client {
		offender := id == "offender"
		c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID(id).
			SetCleanSession(offender).SetAutoReconnect(!offender).SetMaxReconnectInterval(100 * time.Millisecond).
			SetConnectionLostHandler(func(paho.Client, error) { lost.Add(1) }))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", id, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}
	var offenderLost, othersLost atomic.Int64
	offender := connect("offender", &offenderLost)
	big := strings.Repeat("x", 16<<10)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if !offender.IsConnectionOpen() {
				// Errors are the broker's refusals; the loop tries again.
				offender.Connect().WaitTimeout(time.Second)
			}
			tok := offender.Publish("sensors/offender/telemetry", 1, false, `{"device":"offender","blob":"`+big+`"}`)
			select {
			case <-stop:
				return
			case <-tok.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	const sensors, each = 10, 1000
	publishSensorReadings(t, &wg, sensors, each, func(id string) paho.Client { return connect(id, &othersLost) })
	in := func() uint64 {
		var n uint64
		for _, p := range ag.status(t) {
			n += p.ReadingsIn
		}
		return n
	}
	await.True(t, 60*time.Second, `in() >= sensors*each && offenderLost.Load() >= 2`, func() bool { return in() >= sensors*each && offenderLost.Load() >= 2 })
	close(stop)
	wg.Wait()
	if got := in(); got != sensors*each {
		t.Errorf("readings in = %d, want exactly %d", got, sensors*each)
	}
	if n := othersLost.Load(); n != 0 {
		t.Errorf("the well-behaved sensors were disconnected %d times", n)
	}
	if n := metricValue(t, ag.admin, "eddy_broker_too_large_total"); n < 2 {
		t.Errorf("eddy_broker_too_large_total = %v, want the offender's refusals counted", n)
	}
}
