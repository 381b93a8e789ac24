package e2e

// The crash test of a processing-time window. A reading's processing time
// is its arrival, as the ingest log recorded it, so a restore replays the
// logged readings into the windows they arrived in; the test publishes a
// schedule in wall time, aligned to the windows, to an uninterrupted agent
// and to one SIGKILLed at random moments, and compares every window.

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// procWindowCrashConfig: a tumbling window of ptWindow on processing time
// (the source has no timestamp), checkpoints every 5 s, more than two
// windows, so that a kill usually leaves readings of an earlier window
// logged past the last checkpoint, to replay.
const procWindowCrashConfig = `
agent {
  device_id   = "crash"
  data_dir    = "%DATA%"
  admin       = "%ADMIN%"
  parallelism = 2
}
source "mqtt" "sensors" {
  broker    = "%BROKER%"
  client_id = "%CLIENT%"
  topics    = ["sensors/+/telemetry"]
  qos       = 1
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "sums" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" {
    size = "2s"
    time = "processing"
  }
  aggregate {
    n   = count()
    sum = sum(event.v)
  }
  to = [sink.file.out]
}
checkpoint { interval = "5s" }
`

// The schedule: windows [k·ptWindow, (k+1)·ptWindow) of the wall clock,
// ptWindows of them from the first after the test starts; in each, rounds
// ptRound apart from ptFirstRound on, each device publishing one reading
// per round. Nothing is published in the last ptQuiet of a window, so a
// reading published while the killed agent is down still arrives in its
// window once the agent is back, if that takes less than ptQuiet.
const (
	ptWindow     = 2 * time.Second
	ptWindows    = 16
	ptFirstRound = 200 * time.Millisecond
	ptRound      = 100 * time.Millisecond
	ptRounds     = 10
	ptDevices    = 16
	ptQuiet      = ptWindow - ptFirstRound - (ptRounds-1)*ptRound
)

// ptReading is device d's reading in round r of window w: its payload is
// unique, so that the ingest log drops a redelivery by content.
func ptReading(w, r, d int) (topic, payload string, v int) {
	dev := "dev-" + strconv.Itoa(d)
	v = (w*31 + r*7 + d) % 100
	return "sensors/" + dev + "/telemetry", `{"device":"` + dev + `","w":` + strconv.Itoa(w) + `,"r":` + strconv.Itoa(r) + `,"v":` + strconv.Itoa(v) + `}`, v
}

// ptExpected is what the schedule gives when every reading lands in the
// window it was published in: lastFirings' form, per key and window.
func ptExpected(first time.Time) map[string]string {
	out := map[string]string{}
	for w := 0; w < ptWindows; w++ {
		start := first.Add(time.Duration(w) * ptWindow).UnixMilli()
		for d := 0; d < ptDevices; d++ {
			sum := 0
			for r := 0; r < ptRounds; r++ {
				_, _, v := ptReading(w, r, d)
				sum += v
			}
			k := fmt.Sprintf("dev-%d/%v-%v", d, float64(start), float64(start+ptWindow.Milliseconds())) // as lastFirings reads them
			out[k] = fmt.Sprintf("n=%d sum=%d", ptRounds, sum)
		}
	}
	return out
}

// ptCounted is the sum of n over windows in lastFirings' form.
func ptCounted(windows map[string]string) int {
	total := 0
	for _, w := range windows {
		var n, sum int
		if _, err := fmt.Sscanf(w, "n=%d sum=%d", &n, &sum); err == nil {
			total += n
		}
	}
	return total
}

// ptPublish publishes the schedule at QoS 1 through one connection, so
// that both agents receive the readings in one order.
func ptPublish(url string, first time.Time) error {
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("pt-pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	for w := 0; w < ptWindows; w++ {
		for r := 0; r < ptRounds; r++ {
			at := first.Add(time.Duration(w)*ptWindow + ptFirstRound + time.Duration(r)*ptRound)
			time.Sleep(time.Until(at)) // pacing: the schedule itself, not a wait for a condition
			toks := make([]paho.Token, 0, ptDevices)
			for d := 0; d < ptDevices; d++ {
				topic, payload, _ := ptReading(w, r, d)
				toks = append(toks, pub.Publish(topic, 1, false, payload))
			}
			for _, tok := range toks {
				if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
					return fmt.Errorf("publish: %v", tok.Error())
				}
			}
		}
		if late := time.Since(first.Add(time.Duration(w+1)*ptWindow - ptQuiet/2)); late > 0 {
			return fmt.Errorf("window %d: the publisher ended its rounds %v into the quiet part: the machine is too slow for the schedule", w, late)
		}
	}
	return nil
}

// TestCrash_ProcessingTimeWindow kills the binary at random moments of a
// processing-time window's schedule, and restarts it at once; the
// committed windows (key, window start and end, count and sum of the last
// firing) are identical to the uninterrupted run's and to the schedule's.
//
// Why they can be identical: a reading's processing time is its arrival
// as the ingest log recorded it, and a restore replays the readings
// logged after the checkpoint with those times, firing the windows
// between them as the first run did (before the change, they were
// replayed on the clock of the replay, into the window of the restart).
// What the log never received while the agent was down arrives when it
// is back, so the schedule leaves the last ptQuiet of every window quiet,
// and the test fails if a restart took longer than that.
func TestCrash_ProcessingTimeWindow(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t)

	clean := newCrashRun(t, procWindowCrashConfig, "%BROKER%", b.URL(), "%CLIENT%", "eddy-clean")
	crashed := newCrashRun(t, procWindowCrashConfig, "%BROKER%", b.URL(), "%CLIENT%", "eddy-crashed")
	clean.start()
	crashed.start() // both subscribed before the first reading

	first := time.Now().Add(time.Second).Truncate(ptWindow).Add(ptWindow)
	want := ptExpected(first)
	var wg sync.WaitGroup
	var pubErr error
	wg.Go(func() { pubErr = ptPublish(b.URL(), first) })

	// Five kills, one at a random moment of every third window from the
	// second on: during the rounds, in the quiet part, or just before a
	// window's end, so that it passes while the agent is down. Each run
	// lasts about 6 s, so it usually completes a checkpoint.
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill schedule seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 10))
	var killAt []time.Duration
	for w := 1; w+1 < ptWindows; w += 3 {
		killAt = append(killAt, time.Duration(w)*ptWindow+time.Duration(rng.Int64N(int64(ptWindow))))
	}
	restores := 0
	var slowest time.Duration
	for _, at := range killAt {
		time.Sleep(time.Until(first.Add(at))) // pacing: a kill moment of the schedule
		killed := time.Now()
		crashed.kill()
		if crashed.p.logContains("restored checkpoint") {
			restores++
		}
		crashed.start()
		slowest = max(slowest, time.Since(killed))
	}
	wg.Wait()
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	if slowest >= ptQuiet {
		t.Fatalf("a restart took %v, longer than the quiet part of a window (%v): readings published meanwhile may have arrived in the next window", slowest, ptQuiet)
	}

	// The last window fires on the agents' clocks at its end; then a
	// checkpoint commits it. Each agent is done once its committed windows
	// count every reading, in whichever windows it put them.
	for _, r := range []*mqttCrashRun{clean, crashed} {
		await.True(t, 60*time.Second, "every reading committed", func() bool {
			return ptCounted(lastFirings(t, filepath.Join(r.dir, "out"))) >= ptWindows*ptDevices*ptRounds
		})
	}
	if crashed.p.logContains("restored checkpoint") {
		restores++
	}
	clean.stop()
	crashed.stop()
	if restores < 2 {
		t.Fatalf("only %d of the runs restored a checkpoint: the kills came too early to test recovery", restores)
	}

	cleanW := lastFirings(t, filepath.Join(clean.dir, "out"))
	if diff := differingWindows(t, want, cleanW); diff > 0 || len(cleanW) != len(want) {
		t.Fatalf("the uninterrupted run: %d of %d windows differ from the schedule's (%d committed)", diff, len(want), len(cleanW))
	}
	sameWindows(t, cleanW, lastFirings(t, filepath.Join(crashed.dir, "out")), len(killAt))
	t.Logf("%d kills at %v into the schedule (restarts within %v), %d restores: %d windows of %d keys, the same as the uninterrupted run's and the schedule's",
		len(killAt), killAt, slowest.Round(time.Millisecond), restores, len(want), ptDevices)
}
