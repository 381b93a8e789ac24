package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

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
	completed := func() uint64 { return a.ckpt.lastDone.Load() }
	waitCompleted := func(after uint64) uint64 {
		deadline := time.Now().Add(30 * time.Second)
		for completed() <= after {
			if time.Now().After(deadline) {
				t.Fatalf("no checkpoint completed after %d within 30 s", after)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return completed()
	}

	publish(5)
	quiet := waitCompleted(0)
	// 20 intervals (100 ms) of idle ticks with nothing arriving, however
	// long they take.
	const idleTicks = uint64(20 * 100 * time.Millisecond / checkpointTick)
	idle := a.ckpt.idleTicks.Load()
	deadline := time.Now().Add(60 * time.Second)
	for a.ckpt.idleTicks.Load() < idle+idleTicks && completed() <= quiet+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle ticks within 60 s, want %d", a.ckpt.idleTicks.Load()-idle, idleTicks)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// TestCheckpointer_FinalBoundedWhenLoopEnded: final forces a checkpoint
// through the coordinator's loop; once that loop has ended (checkpoints
// kept failing, so the agent is stopping) nothing answers, and final must
// still return when its context ends (a SIGTERM while checkpoints kept
// failing used to hang the agent here for good).
func TestCheckpointer_FinalBoundedWhenLoopEnded(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true) // the checkpointer's loop does not run
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.ckpt.final(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("final = %v, want the context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("final did not return after its context ended")
	}
}
