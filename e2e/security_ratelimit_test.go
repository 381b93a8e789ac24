package e2e

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// TestEmbeddedBroker_RateLimit runs the real binary with its embedded
// broker at max_messages_per_second = 500 (burst 500): one client publishes
// 3,000 QoS 1 readings as fast as it can while 10 others publish 200
// readings each at QoS 1. The flooder's readings never arrive faster than
// the burst plus the rate allows, the delays are counted in
// eddy_broker_throttled_total, and all of its readings still arrive; the
// 10 are counted exactly once each and never disconnected.
func TestEmbeddedBroker_RateLimit(t *testing.T) {
	const rate, burst = 500, 500
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	ag := startAgent(t, dir, fmt.Sprintf(`
agent {
  device_id = "rate"
  data_dir  = "%%DATA%%"
  admin     = "%%ADMIN%%"
}
broker {
  listen                  = "%s"
  max_messages_per_second = %d
  max_messages_burst      = %d
}
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
}
source "mqtt" "flood" {
  broker = "embedded"
  topics = ["flood/#"]
  qos    = 1
}
sink "file" "out" { path = "%%DIR%%/out.jsonl" }
pipeline "sensors" {
  from = source.mqtt.sensors
  to   = [sink.file.out]
}
pipeline "flood" {
  from = source.mqtt.flood
  to   = [sink.file.out]
}
`, brokerAddr, rate, burst))
	in := func(name string) uint64 {
		for _, p := range ag.status(t) {
			if p.Name == name {
				return p.ReadingsIn
			}
		}
		return 0
	}
	var flooderLost, othersLost atomic.Int64
	connect := func(id string, lost *atomic.Int64) paho.Client {
		c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID(id).
			SetAutoReconnect(false).SetConnectionLostHandler(func(paho.Client, error) { lost.Add(1) }))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", id, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}

	flooder := connect("flooder", &flooderLost)
	const floods = 3000
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range floods {
			flooder.Publish("flood/x", 1, false, fmt.Sprintf(`{"seq":%d}`, i))
		}
	})
	const sensors, each = 10, 200
	publishSensorReadings(t, &wg, sensors, each, func(id string) paho.Client { return connect(id, &othersLost) })
	// Whenever it is looked at, the flooder has had no more than the burst
	// plus the rate over the time since it started (an upper bound: load
	// on the machine only lowers it).
	var over string
	await.True(t, 120*time.Second, `n >= floods && in("sensors") >= sensors*each`, func() bool {
		n := in("flood")
		if allowed := burst + rate*time.Since(start).Seconds(); float64(n) > allowed && over == "" {
			over = fmt.Sprintf("%d flood readings after %v, more than the %v allowed", n, time.Since(start), allowed)
		}
		return n >= floods && in("sensors") >= sensors*each
	})
	wg.Wait()
	if over != "" {
		t.Error(over)
	}
	if got := in("sensors"); got != sensors*each {
		t.Errorf("sensor readings in = %d, want exactly %d", got, sensors*each)
	}
	if got := in("flood"); got != floods {
		t.Errorf("flood readings in = %d, want all %d (delayed, not dropped)", got, floods)
	}
	if n := othersLost.Load() + flooderLost.Load(); n != 0 {
		t.Errorf("clients disconnected %d times; a rate limit delays, it does not disconnect", n)
	}
	if took := time.Since(start); took < time.Duration(float64(floods-burst)/rate*float64(time.Second)) {
		t.Errorf("the flood took %v: faster than the rate", took)
	}
	// How many publishes had to wait depends on how fast the flooder got
	// them out (a loaded machine slows it below the rate at times).
	if n := metricValue(t, ag.admin, "eddy_broker_throttled_total"); n < 1 || n > floods-burst {
		t.Errorf("eddy_broker_throttled_total = %v, want the flooder's delayed publishes counted (1 to %d)", n, floods-burst)
	}
}

// publishSensorReadings starts, in wg, sensors clients made by connect
// ("sensor-<i>"), each publishing each readings at QoS 1 on
// sensors/s<i>/telemetry and waiting for their acknowledgements.
func publishSensorReadings(t *testing.T, wg *sync.WaitGroup, sensors, each int, connect func(id string) paho.Client) {
	for s := range sensors {
		wg.Go(func() {
			c := connect(fmt.Sprintf("sensor-%d", s))
			toks := make([]paho.Token, each)
			for i := range each {
				toks[i] = c.Publish(fmt.Sprintf("sensors/s%d/telemetry", s), 1, false, fmt.Sprintf(`{"device":"s%d","seq":%d}`, s, i))
			}
			for i, tok := range toks {
				if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
					t.Errorf("sensor %d publish %d: %v", s, i, tok.Error())
					return
				}
			}
		})
	}
}
