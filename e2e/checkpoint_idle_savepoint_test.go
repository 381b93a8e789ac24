package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

const idleSavepointConfig = `
agent {
  device_id = "quiet"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to = [sink.file.out]
}
checkpoint { interval = "1s" }
`

// TestCheckpoint_SavepointOnQuietDevice: after some readings and then
// several checkpoint intervals with none, `eddy savepoint` returns within
// 5 s. The agent stops ticking its checkpoints while nothing changes; the
// request first started the overdue periodic checkpoint and queued the
// savepoint behind it, which then waited for the next reading.
func TestCheckpoint_SavepointOnQuietDevice(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	p := startAgent(t, dir, idleSavepointConfig, "%BROKER%", brokerAddr)
	cfg := dir + "/agent.hcl"

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("sensor-1"))
	await.True(t, 15*time.Second, `tok.WaitTimeout(2*time.Second) && tok.Error() == nil`, func() bool {
		tok := pub.Connect()
		return tok.WaitTimeout(2*time.Second) && tok.Error() == nil
	})
	for i := range 20 {
		tok := pub.Publish(fmt.Sprintf("sensors/dev-%d/telemetry", i%2), 1, false, fmt.Sprintf(`{"device":"dev-%d","v":%d}`, i%2, i))
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	pub.Disconnect(100)
	await.True(t, 30*time.Second, `len(st) == 1 && st[0].ReadingsIn == 20`, func() bool {
		st := p.status(t)
		return len(st) == 1 && st[0].ReadingsIn == 20
	})

	// Quiet: the last checkpoint stays the last for three intervals, so
	// the next periodic one is overdue and nothing triggers it.
	var last uint64
	var since time.Time
	await.True(t, 60*time.Second, `time.Since(since) >= 3*time.Second`, func() bool {
		trig, done, ok := p.checkpointIDs()
		if !ok || trig != done || done == 0 {
			since = time.Time{}
			return false
		}
		if done != last || since.IsZero() {
			last, since = done, time.Now()
			return false
		}
		return time.Since(since) >= 3*time.Second
	})

	sp := startEddy(t, "savepoint", "-c", cfg)
	start := time.Now()
	if !sp.wait(5 * time.Second) {
		t.Fatalf("eddy savepoint on a quiet device did not return within 5 s")
	}
	if sp.err != nil || !regexp.MustCompile(`savepoint \d+ taken`).MatchString(sp.output()) {
		t.Fatalf("eddy savepoint: %v: %s", sp.err, sp.output())
	}
	t.Logf("savepoint returned after %v", time.Since(start).Round(time.Millisecond))
}
