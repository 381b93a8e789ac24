package e2e

// The crash test of absence on processing time. Its silences are found on
// the agent's clock, so the workload is a schedule in wall time that the
// test publishes itself, through mosquitto, to an uninterrupted agent and
// to one SIGKILLed at random moments, both subscribed at once; the
// transitions, not the records' times, are compared.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// procAbsenceCrashConfig is mqttCrashConfig with a second pipeline beside
// the window one: absence on processing time (the default) with a 6 s
// timeout, to a second exactly-once sink.
var procAbsenceCrashConfig = replaceAll(mqttCrashConfig, "checkpoint { interval = \"200ms\" }", `sink "file" "changes" {
  path     = "%DIR%/changes"
  delivery = "exactly_once"
}
pipeline "changes" {
  from = source.mqtt.sensors
  key  = event.device
  absence { timeout = "6s" }
  to   = [sink.file.changes]
}
checkpoint { interval = "100ms" }`)

// The schedule of procAbsenceCrashConfig's test: every round (500 ms) each
// device not silent then publishes one reading; device d < absSilent is
// silent for absSilenceRounds (18 s, 3 × the timeout) from round
// absSilenceFrom(d), in four groups a few seconds apart, and speaks again
// until the last round. Then a reading of the device "flush" far ahead in
// event time closes every window, and every device falls silent for good.
const (
	absTimeout       = 6 * time.Second
	absRound         = 500 * time.Millisecond
	absRounds        = 60
	absDevices       = 32
	absSilent        = 8
	absSilenceRounds = 36
)

func absSilenceFrom(d int) int { return 6 + 4*(d%4) }

// absSpeaks reports whether device d publishes in round r.
func absSpeaks(d, r int) bool {
	return d >= absSilent || r < absSilenceFrom(d) || r >= absSilenceFrom(d)+absSilenceRounds
}

// absReading is the topic and payload of device d's reading in round r:
// its event time is the round, in seconds, and the payload is unique, so
// that the agent's ingest log drops a redelivery by content.
func absReading(d, r int) (topic, payload string) {
	dev := "dev-" + strconv.Itoa(d)
	ts := int64(1_700_000_000_000) + int64(r)*1000
	return "sensors/" + dev + "/telemetry", `{"device":"` + dev + `","ts":` + strconv.FormatInt(ts, 10) + `,"r":` + strconv.Itoa(r) + `,"v":` + strconv.Itoa((r*7+d)%100) + `}`
}

const absFlush = `{"device":"flush","ts":1700003600000,"v":0}`

// absExpected returns what the schedule gives: per key, its transitions
// ("silent o<offset>/0", "resumed o<offset>/0") in order, where the offset
// is the reading's position in the published stream (the ingest log's
// offsets start at 1), and how many windows the window pipeline fires.
func absExpected() (map[string][]string, int) {
	trans := map[string][]string{}
	last := map[string]int{}
	windows := map[string]bool{}
	offset := 0
	for r := 0; r < absRounds; r++ {
		for d := 0; d < absDevices; d++ {
			if !absSpeaks(d, r) {
				continue
			}
			offset++
			dev := "dev-" + strconv.Itoa(d)
			if d < absSilent && r == absSilenceFrom(d)+absSilenceRounds {
				id := fmt.Sprintf("o%d/0", last[dev])
				trans[dev] = append(trans[dev], "silent "+id, "resumed "+id)
			}
			last[dev] = offset
			windows[dev+"/"+strconv.Itoa(r/10)] = true
		}
	}
	offset++
	last["flush"] = offset // its window stays open: nothing passes it
	for dev, o := range last {
		trans[dev] = append(trans[dev], fmt.Sprintf("silent o%d/0", o))
	}
	return trans, len(windows)
}

// absPublish publishes the schedule at QoS 1 through one connection, so
// that both agents receive the readings in one order; round r starts r
// rounds after start.
func absPublish(url string, start time.Time) error {
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("abs-pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	send := func(topic, payload string) paho.Token { return pub.Publish(topic, 1, false, payload) }
	for r := 0; r < absRounds; r++ {
		time.Sleep(time.Until(start.Add(time.Duration(r) * absRound))) // pacing: the schedule itself, not a wait for a condition
		var toks []paho.Token
		for d := 0; d < absDevices; d++ {
			if absSpeaks(d, r) {
				toks = append(toks, send(absReading(d, r)))
			}
		}
		if r == absRounds-1 {
			toks = append(toks, send("sensors/flush/telemetry", absFlush))
		}
		for _, tok := range toks {
			if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				return fmt.Errorf("publish: %v", tok.Error())
			}
		}
	}
	return nil
}

// absTransitions reads the committed absence records of an agent's
// "changes" sink: per key, "kind o<offset>/<n>" in the order committed.
// Every record must be a processing-time absence record, and a silence
// must last the timeout.
func absTransitions(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, l := range committedRecords(t, filepath.Join(dir, "changes")) {
		var r signalRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "silent" && r.TimeMs-r.StartMs != absTimeout.Milliseconds() {
			t.Fatalf("silent record %s: want time = start + %v", l, absTimeout)
		}
		if r.Kind == "resumed" && r.Duration < absTimeout.Milliseconds() {
			t.Fatalf("resumed record %s: want a gap of at least %v", l, absTimeout)
		}
		if !strings.HasPrefix(r.ID, "crash/changes/"+r.Key+"/absence/"+r.Kind+"/o") {
			t.Fatalf("record %s: want a processing-time absence id", l)
		}
		out[r.Key] = append(out[r.Key], r.Kind+" "+idFrom(r.ID))
	}
	return out
}

func countTransitions(m map[string][]string) int {
	n := 0
	for _, ts := range m {
		n += len(ts)
	}
	return n
}

// sameTransitions fails the test unless got holds want's transitions, key
// by key in the same order, reporting up to 10 keys that differ.
func sameTransitions(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	var diff []string
	for k := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: %v, want none", k, got[k]))
		}
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			diff = append(diff, fmt.Sprintf("%s: %v, want %v", k, got[k], w))
		}
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		t.Fatalf("%s: %d keys' transitions differ:\n%s", what, len(diff), strings.Join(diff[:min(10, len(diff))], "\n"))
	}
}

// TestCrash_ProcessingTimeAbsence kills the binary at random moments
// (some just before a silence's deadline, so that it passes while the
// agent is down) while a processing-time absence pipeline runs beside the
// window pipeline, on readings the test publishes on a schedule in wall
// time; the committed silent/resumed transitions, per key in order with
// their ids, equal the uninterrupted run's and the schedule's, each once,
// and so do the windows.
//
// Why the transitions are the schedule's, in every run: every gap between
// two readings of a device is either at most a round (500 ms) or at least
// 3 × the timeout (18 s). The agent sees a gap as longer or shorter than
// the schedule by the delay between a reading's publication and its
// processing, which a kill raises to the age of the checkpoint restored
// plus the restart plus what mosquitto queued meanwhile (a restore
// replays the logged readings with their logged arrivals, but what the
// agent did not receive before the kill arrives after the restart). Checkpoints every 100 ms and kills at least
// 2 s apart, so that every run completes some, keep that to a few
// seconds at most (the restarts take well under one), below
// timeout - round (5.5 s), by which a speaking device's restored deadline
// (due timers fire first after a restore) could pass before its next
// reading, and below 2 × timeout, by which a silence could shrink below
// the timeout. A silence's deadline that passes while the agent is down
// fires as soon as the agent runs again (its first tick), or the
// resuming reading reports the silence first: the same records either
// way. The ids are deterministic too: they name the reading by its
// ingest-log offset, and one publisher's readings reach each agent in one
// order, the ingest log dropping mosquitto's redeliveries of what it had
// already logged.
func TestCrash_ProcessingTimeAbsence(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t)
	want, wantWindows := absExpected()

	clean := newCrashRun(t, procAbsenceCrashConfig, "%BROKER%", b.URL(), "%CLIENT%", "eddy-clean")
	crashed := newCrashRun(t, procAbsenceCrashConfig, "%BROKER%", b.URL(), "%CLIENT%", "eddy-crashed")
	clean.start()
	crashed.start() // both subscribed before the first reading

	start := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	var pubErr error
	wg.Go(func() { pubErr = absPublish(b.URL(), start) })

	// Six kills, at least 2 s apart, between 1 s and the last deadline:
	// two of them up to 300 ms before a silence's deadline; one after the
	// last reading, so that the last silences come from restored timers
	// (or from the restored state, for those that passed while the agent
	// was down); the others at random.
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill schedule seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var killAt []time.Duration
	free := func(at time.Duration) bool {
		for _, k := range killAt {
			if (at - k).Abs() < 2*time.Second {
				return false
			}
		}
		return true
	}
	g := rng.IntN(2)
	for _, g := range []int{g, g + 2} { // deadlines 4 s apart
		deadline := time.Duration(absSilenceFrom(g)-1)*absRound + absTimeout
		killAt = append(killAt, deadline-time.Duration(rng.Int64N(int64(300*time.Millisecond))))
	}
	lastRound := time.Duration(absRounds-1) * absRound
	killAt = append(killAt, lastRound+time.Second+time.Duration(rng.Int64N(int64(absTimeout-3*time.Second))))
	end := lastRound + absTimeout
	for len(killAt) < 6 {
		if at := time.Second + time.Duration(rng.Int64N(int64(end-time.Second))); free(at) {
			killAt = append(killAt, at)
		}
	}
	slices.Sort(killAt)
	restores := 0
	var slowest time.Duration // from a kill to the next run's connection
	var down [][2]int64       // from each kill to the next run's connection, Unix ms
	for _, at := range killAt {
		time.Sleep(time.Until(start.Add(at))) // pacing: a kill moment of the schedule
		killed := time.Now()
		crashed.kill()
		if crashed.p.logContains("restored checkpoint") {
			restores++
		}
		crashed.start()
		slowest = max(slowest, time.Since(killed))
		down = append(down, [2]int64{killed.UnixMilli(), time.Now().UnixMilli()})
	}
	wg.Wait()
	if pubErr != nil {
		t.Fatal(pubErr)
	}

	// The last silences come a timeout after the last round; the agents
	// are stopped once both have committed as many as the schedule gives.
	for _, r := range []*mqttCrashRun{clean, crashed} {
		await.Holds(60*time.Second, func() bool {
			return countTransitions(absTransitions(t, r.dir)) >= countTransitions(want) && len(lastFirings(t, filepath.Join(r.dir, "out"))) >= wantWindows
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

	cleanTrans := absTransitions(t, clean.dir)
	sameTransitions(t, "the uninterrupted run against the schedule", cleanTrans, want)
	sameTransitions(t, fmt.Sprintf("after %d kills against the uninterrupted run", len(killAt)), absTransitions(t, crashed.dir), cleanTrans)
	wantW := lastFirings(t, filepath.Join(clean.dir, "out"))
	if len(wantW) != wantWindows {
		t.Fatalf("the uninterrupted run committed %d windows, want %d", len(wantW), wantWindows)
	}
	sameWindows(t, wantW, lastFirings(t, filepath.Join(crashed.dir, "out")), len(killAt))
	// For the log: the silences whose deadline passed while the agent was
	// down (most runs have some; their timing is the machine's).
	whileDown := 0
	for _, l := range committedRecords(t, filepath.Join(crashed.dir, "changes")) {
		var r signalRecord
		if json.Unmarshal([]byte(l), &r) == nil && r.Kind == "silent" &&
			slices.ContainsFunc(down, func(d [2]int64) bool { return d[0] <= r.TimeMs && r.TimeMs < d[1] }) {
			whileDown++
		}
	}
	t.Logf("%d kills (restarts within %v, %d silences due meanwhile), %d restores: %d transitions of %d keys and %d windows, the same as the uninterrupted run's and the schedule's",
		len(killAt), slowest.Round(time.Millisecond), whileDown, restores, countTransitions(want), len(want), wantWindows)
}
