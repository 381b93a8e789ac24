package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/cpuhog"
	"github.com/eddy-edge/eddy/scripts/faultbroker"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// starvedScale is the size of TestCrash_MQTTStarvedCPU. CI: 200,000
// readings through the fault broker, 3 SIGKILLs (one followed by a re-sent
// DUP block of 100,000), 1 upstream restart. EDDY_CRASH_LONG=1
// (scripts/crash-long.sh): 1,000,000 readings through Debian's mosquitto
// tuned as the README says, 20 SIGKILLs, 6 upstream restarts, and an
// uninterrupted run to compare with.
type starvedScale struct {
	readings, kills, upRestarts int
	long                        bool
}

func starvedRun() starvedScale {
	if os.Getenv("EDDY_CRASH_LONG") != "" {
		return starvedScale{readings: 1_000_000, kills: 20, upRestarts: 6, long: true}
	}
	return starvedScale{readings: 200_000, kills: 3, upRestarts: 1}
}

// starvedRate is the sensors' rate: 20,000 readings per second from 1,000
// devices, stamped at that rate (readingGen{stepUs: 50}).
const starvedRate = 20_000

// readingPublisher publishes readings to the sensors' broker.
type readingPublisher interface {
	publish(topic string, payload []byte)
	// wait returns once what was published is at the broker.
	wait() error
}

// faultPublisher publishes through the fault broker's test API.
type faultPublisher struct{ b *faultbroker.Broker }

func (p faultPublisher) publish(topic string, payload []byte) { p.b.Publish(topic, payload) }
func (p faultPublisher) wait() error                          { return nil }

// pahoPublisher publishes at QoS 1 through a paho client.
type pahoPublisher struct {
	c    paho.Client
	toks []paho.Token
}

func newPahoPublisher(t *testing.T, url, id string) *pahoPublisher {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(id).SetMaxResumePubInFlight(1000))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return &pahoPublisher{c: c}
}

func (p *pahoPublisher) publish(topic string, payload []byte) {
	p.toks = append(p.toks, p.c.Publish(topic, 1, false, payload))
}

func (p *pahoPublisher) wait() error {
	for _, tok := range p.toks {
		if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
			return fmt.Errorf("publish: %v", tok.Error())
		}
	}
	p.toks = p.toks[:0]
	return nil
}

// publishPaced publishes g's readings 0..n-1 and its flush reading at
// starvedRate, in batches of 1,000; between(i) runs after the batch that
// starts at i.
func publishPaced(t *testing.T, p readingPublisher, g readingGen, n int, between func(i int)) {
	t.Helper()
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		for j := i; j < min(i+1000, n); j++ {
			p.publish(g.message(j))
		}
		if err := p.wait(); err != nil {
			t.Fatal(err)
		}
		if d := time.Duration(i+1000)*time.Second/starvedRate - time.Since(start); d > 0 {
			time.Sleep(d) // pacing: the sensors' rate
		}
		between(i)
	}
	p.publish(g.flush(n))
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
}

// TestCrash_MQTTStarvedCPU is the MQTT crash test on a starved CPU: every
// core spins in other processes for the whole run while 1,000 devices
// publish QoS 1 readings at 20,000/s; the agent is SIGKILLed and restarted
// and the upstream broker restarted under it. The results delivered
// upstream through the exactly-once MQTT sink are exactly the windows of
// the readings sent (and, in the long run, an uninterrupted run's), and
// the MQTT source never lost its connection but to the kills.
//
// In CI the sensors' broker is the fault broker, which after one of the
// kills re-sends, with DUP=1, the last 100,000 messages the agent had
// acknowledged: more than 65,536, as mosquitto did under this load.
func TestCrash_MQTTStarvedCPU(t *testing.T) {
	t.Parallel()
	sc := starvedRun()
	g := readingGen{devices: 1000, stepUs: 1_000_000 / starvedRate}
	want := g.expected(sc.readings)
	up := mosquitto.Start(t)
	col := newCollector(t, up.URL(), "results/#")
	cpuhog.Start(t, 0)

	// sensors starts the sensors' broker of a run: its URL, a publisher,
	// and the fault broker if it is one.
	sensors := func() (string, readingPublisher, *faultbroker.Broker) {
		if sc.long {
			in := mosquitto.Start(t)
			return in.URL(), newPahoPublisher(t, in.URL(), "sensors"), nil
		}
		b := startFaultBroker(t)
		return b.URL(), faultPublisher{b}, b
	}

	settle := func(device string) map[string]string {
		await.True(t, 5*time.Minute, `col.windowCount(device) >= len(want)`, func() bool { return col.windowCount(device) >= len(want) })
		return col.windows(device)
	}
	var lost []string // "mqtt source: connection lost" lines, from every process

	if sc.long {
		url, pub, _ := sensors()
		clean := newCrashRun(t, walCrashConfig, "%DEVICE%", "clean", "%BROKER%", url, "%UPSTREAM%", up.URL())
		clean.start()
		publishPaced(t, pub, g, sc.readings, func(int) {})
		got := settle("clean")
		clean.stop()
		lost = append(lost, sourceLost(clean.p)...)
		if diff := differingWindows(t, want, got); diff > 0 {
			t.Fatalf("uninterrupted run: %d of %d windows differ from the readings sent", diff, len(want))
		}
	}

	url, pub, fb := sensors()
	crashed := newCrashRun(t, walCrashConfig, "%DEVICE%", "crashed", "%BROKER%", url, "%UPSTREAM%", up.URL())
	crashed.start()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	batches := sc.readings / 1000
	killAt, restartAt := map[int]bool{}, map[int]bool{}
	for len(killAt) < sc.kills {
		killAt[(1+rng.IntN(batches-1))*1000] = true
	}
	for len(restartAt) < sc.upRestarts {
		restartAt[(1+rng.IntN(batches-1))*1000] = true
	}
	// The re-sent block follows the first kill after 150,000 readings
	// (CI only: the fault broker), once 100,000 are acknowledged.
	const block = 100_000
	resendAt := -1
	if fb != nil {
		resendAt = 150_000
		killAt[resendAt] = true
	}
	const client = "eddy-crashed-in"
	var redelivered redeliveryTotals
	publishPaced(t, pub, g, sc.readings, func(i int) {
		if restartAt[i] {
			up.Restart()
		}
		if !killAt[i] {
			return
		}
		if i == resendAt {
			waitAcked(t, fb, client, block, 60*time.Second)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // pacing: a random kill moment
		redelivered.add(t, crashed.admin)
		crashed.kill()
		lost = append(lost, sourceLost(crashed.p)...)
		if i == resendAt {
			fb.ResendOnReconnect(client, faultbroker.Resend{Last: block, Dup: true})
		}
		crashed.start()
	})
	got := settle("crashed")
	redelivered.add(t, crashed.admin)
	crashed.stop()
	lost = append(lost, sourceLost(crashed.p)...)

	if fb != nil {
		if st := fb.SessionStats(client); st.Resent != block {
			t.Errorf("fault broker re-sent %d messages, want %d", st.Resent, block)
		}
		// The sum misses what a run dropped between its last reading and
		// its kill, so it is near the block, not above it; well above the
		// 65,536 recent entries an older dedup remembered.
		if redelivered.dropped <= 65_536 {
			t.Errorf("the ingest dedup dropped %v redeliveries of the re-sent block of %d", redelivered.dropped, block)
		}
	}
	if len(lost) > 0 {
		t.Errorf("the MQTT source lost its connection without a kill: %v", lost)
	}
	diff := differingWindows(t, want, got)
	var extra []string
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("%d extra windows, e.g. %v", len(extra), extra[:min(5, len(extra))])
	}
	if diff > 0 || t.Failed() {
		t.Fatalf("%d of %d windows differ after %d kills on a starved CPU", diff, len(want), len(killAt))
	}
	t.Logf("%d readings at %d/s on a starved CPU, %d kills, %d upstream restarts: %d windows delivered upstream, each exact; the ingest dedup dropped %v redeliveries and kept %v unmatched (by the metrics, read before each kill)",
		sc.readings, starvedRate, len(killAt), len(restartAt), len(want), redelivered.dropped, redelivered.unmatched)
}

// redeliveryTotals sums the ingest dedup's counters of the agent's runs.
type redeliveryTotals struct{ dropped, unmatched float64 }

// add adds the counters of the run whose admin endpoint is admin (a run
// that does not export one adds nothing).
func (r *redeliveryTotals) add(t *testing.T, admin string) {
	r.dropped += max(metricValue(t, admin, `eddy_ingest_redeliveries_dropped_total{source="sensors"}`), 0)
	r.unmatched += max(metricValue(t, admin, `eddy_ingest_redeliveries_unmatched_total{source="sensors"}`), 0)
}

// sourceLost returns the lines in p's output where the MQTT source lost its
// connection.
func sourceLost(p *eddyProc) []string {
	var out []string
	for _, l := range strings.Split(p.output(), "\n") {
		if strings.Contains(l, "mqtt source: connection lost") {
			out = append(out, l)
		}
	}
	return out
}
