package agent

import (
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/agent/checkpointing"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// TestCheckpoint_SkippedWhileNothingChanges runs an agent whose sensors
// stop publishing: once the checkpoint holding their readings is complete,
// no periodic checkpoint follows while nothing arrives (an idle device
// writes nothing), and the next reading gets one again.
func TestCheckpoint_SkippedWhileNothingChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent")
	}
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	a := startAgent(t, dir, `
agent {
  device_id = "skip"
  data_dir  = "%DATA%"
  admin     = ""
}
broker { listen = "`+brokerAddr+`" }
source "mqtt" "s" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "p" {
  from = source.mqtt.s
  key  = event.device
  window "tumbling" { size = "1h" }
  aggregate { n = count() }
  to = [sink.file.out]
}
checkpoint { interval = "100ms" }
ingest { linger = "0s" }
`)
	c := connectSensor(t, brokerAddr)
	publish := func(n int) {
		for i := range n {
			tok := c.Publish("sensors/d1/telemetry", 1, false, fmt.Sprintf(`{"device":"d1","ts":%d}`, time.Now().UnixMilli()+int64(i)))
			if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}
	completed := func() uint64 { return a.ckpt.LastCompleted() }
	waitCompleted := func(after uint64) uint64 {
		await.True(t, 30*time.Second, fmt.Sprintf("a checkpoint to complete after %d", after), func() bool { return completed() > after })
		return completed()
	}

	publish(5)
	quiet := waitCompleted(0)
	// 20 intervals (100 ms) of idle ticks with nothing arriving, however
	// long they take.
	const idleTicks = uint64(20 * 100 * time.Millisecond / checkpointing.Tick)
	idle := a.ckpt.Stats().IdleTicks
	await.Until(t, 60*time.Second, func() error {
		if n := a.ckpt.Stats().IdleTicks - idle; n < idleTicks && completed() <= quiet+1 {
			return fmt.Errorf("%d idle ticks, want %d", n, idleTicks)
		}
		return nil
	})
	// One more may follow if the readings straddled the first barrier.
	if got := completed(); got > quiet+1 {
		t.Fatalf("checkpoints went from %d to %d over 20 intervals with nothing arriving: want them skipped", quiet, got)
	}
	quiet = completed()
	publish(1)
	waitCompleted(quiet)
}

// connectSensor connects a paho client (id "sensor") to the broker at addr,
// disconnected when the test ends.
func connectSensor(t *testing.T, addr string) paho.Client {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("sensor"))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}
