package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// collector is the upstream consumer of the WAL-sink tests: a persistent
// QoS 2 subscriber that records every result by id. mosquitto 2.0.11 may
// itself re-send a QoS 2 message it already delivered when restarted
// (DUP=1, same payload); those broker-side repeats are ignored. Any other
// repeat of an id is a duplicate the sink sent.
type collector struct {
	mu         sync.Mutex
	byID       map[string]string
	last       map[string]map[string]string // device → window → fields of the last firing
	lastEnd    map[string]float64           // device/key → last window end seen, for order
	duplicates []string
	changed    []string // repeated ids whose payload differs
	brokerReps int
	outOfOrder []string
	receipts   map[string]int // id → every copy received
	order      []string       // every copy's id, as received
	subscribed int            // connections whose subscription the broker granted
	client     paho.Client
}

func newCollector(t *testing.T, url, topic string) *collector {
	c := &collector{byID: map[string]string{}, last: map[string]map[string]string{}, lastEnd: map[string]float64{}, receipts: map[string]int{}}
	opts := paho.NewClientOptions().AddBroker(url).SetClientID("collector").SetCleanSession(false).
		SetAutoReconnect(true).SetMaxReconnectInterval(500 * time.Millisecond).SetOrderMatters(true)
	opts.SetOnConnectHandler(func(cl paho.Client) {
		tok := cl.Subscribe(topic, 2, c.onMessage)
		go func() {
			if tok.Wait() && tok.Error() == nil {
				c.mu.Lock()
				c.subscribed++
				c.mu.Unlock()
			}
		}()
	})
	c.client = paho.NewClient(opts)
	if tok := c.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("collector connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.client.Disconnect(100) })
	// OnConnect subscribes in its own goroutine: wait here until the broker
	// has the subscription, or a broker stopped right after this returns
	// might never store it, and results published after its restart would
	// reach nobody.
	if tok := c.client.Subscribe(topic, 2, c.onMessage); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("collector subscribe: %v", tok.Error())
	}
	return c
}

func (c *collector) onMessage(_ paho.Client, m paho.Message) {
	var r map[string]any
	if err := json.Unmarshal(m.Payload(), &r); err != nil {
		return
	}
	id, _ := r["id"].(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receipts[id]++
	c.order = append(c.order, id)
	if prev, seen := c.byID[id]; seen {
		if m.Duplicate() && prev == string(m.Payload()) {
			c.brokerReps++
			return
		}
		c.duplicates = append(c.duplicates, id)
		if prev != string(m.Payload()) {
			c.changed = append(c.changed, id)
		}
		return
	}
	c.byID[id] = string(m.Payload())
	dev := fmt.Sprint(r["pipeline"]) + "@" + idDevice(id)
	key, _ := r["key"].(string)
	end, _ := r["window_end_ms"].(float64)
	if end < c.lastEnd[dev+"/"+key] {
		c.outOfOrder = append(c.outOfOrder, id)
	}
	c.lastEnd[dev+"/"+key] = end
	w := fmt.Sprintf("%s/%v-%v", key, r["window_start_ms"], r["window_end_ms"])
	if c.last[dev] == nil {
		c.last[dev] = map[string]string{}
	}
	c.last[dev][w] = fmt.Sprintf("n=%v sum=%v", r["n"], r["sum"])
}

func idDevice(id string) string {
	for i := range id {
		if id[i] == '/' {
			return id[:i]
		}
	}
	return id
}

func (c *collector) windows(device string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.last["sums@"+device] {
		out[k] = v
	}
	return out
}

// windowCount is c.windowCount(device) without the copy: waits poll it,
// and a copy of thousands of windows under the lock would hold up the
// collector's own handler while it drains the broker.
func (c *collector) windowCount(device string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.last["sums@"+device])
}

// received is how many results the collector got, repeats included.
func (c *collector) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

// walCrashConfig is mqttCrashConfig on device %DEVICE% whose results go
// upstream (%UPSTREAM%) through an exactly-once MQTT sink.
var walCrashConfig = replaceAll(mqttCrashConfig,
	`device_id   = "crash"`, `device_id   = "%DEVICE%"`,
	`client_id = "%CLIENT%"`, `client_id = "eddy-%DEVICE%-in"`,
	`sink "file" "out" {
  path     = "%DIR%/out"`, `sink "mqtt" "cloud" {
  broker   = "%UPSTREAM%"
  topic    = "results/${device_id}/${pipeline}/${key}"`,
	`to = [sink.file.out]`, `to = [sink.mqtt.cloud]`)

// upstreamBroker is an upstream broker configuration the WAL sink's
// delivery tests run against, with the sink's window for it.
type upstreamBroker struct {
	name string
	// start starts the broker; nil: mosquitto with opts.
	start func(t *testing.T) upstream
	opts  []mosquitto.Option
	// window is added to the sink block.
	window string
	// qos1: the sink publishes at QoS 1, so each crash or reconnect may
	// repeat up to the in-flight window (20), each repeat with its id.
	qos1 bool
}

// upstreamBrokers: mosquitto as the README asks for throughput
// (max_inflight_messages 1000) with the sink's window raised to 100,
// mosquitto as installed (20 in flight) with the sink's default window,
// spoken to in MQTT 5 (the sink's default) and, as installed, in 3.1.1, and
// two that keep their sessions in memory only: aedes, and the embedded
// broker of a second agent.
var upstreamBrokers = []upstreamBroker{
	{name: "upstream_max_inflight_messages_1000", window: "\n  max_inflight = 100"},
	{name: "upstream_default_config", opts: []mosquitto.Option{mosquitto.DefaultInflight()}},
	{name: "upstream_default_config_mqtt311", opts: []mosquitto.Option{mosquitto.DefaultInflight()}, window: "\n  protocol_version = 4"},
	{name: "aedes", window: "\n  max_inflight = 100", start: startAedesUpstream},
	{name: "embedded", window: "\n  max_inflight = 100", start: startEmbeddedUpstream},
}

// upstream is a running upstream broker of the WAL-sink tests.
type upstream interface {
	collectorURL() string
	// sinkURL is where the sink whose deliveries are judged publishes.
	sinkURL() string
	// stop stops the broker; restart starts it again, stopping it first
	// if it runs. Either may run in a goroutine of its own.
	stop(c *collector)
	restart(c *collector)
	// brokerRepeats is, per result id of device, how many repeats of it
	// the collector got that the broker provably made by itself. It
	// fails the test where the broker's own record shows the sink at
	// fault.
	brokerRepeats(t reporter, c *collector, device string) map[string]int
}

// reporter is the part of *testing.T a judge of the results uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// mosquittoUpstream keeps its QoS 2 sessions across a SIGTERM restart
// (persistence): it repeats nothing by itself.
type mosquittoUpstream struct{ *mosquitto.Broker }

func (m mosquittoUpstream) collectorURL() string { return m.URL() }
func (m mosquittoUpstream) sinkURL() string      { return m.URL() }
func (m mosquittoUpstream) stop(*collector)      { m.Stop() }
func (m mosquittoUpstream) restart(*collector)   { m.Restart() }
func (mosquittoUpstream) brokerRepeats(reporter, *collector, string) map[string]int {
	return nil
}

// mosquittoUpstreams are the two mosquitto configurations of
// upstreamBrokers in the sink's default protocol: what the WAL's own
// behaviour (its disk budget) is tested against, the broker and its
// protocol version being the crash matrix's concern.
func mosquittoUpstreams() []upstreamBroker {
	var us []upstreamBroker
	for _, u := range upstreamBrokers {
		if u.start == nil && !strings.Contains(u.window, "protocol_version") {
			us = append(us, u)
		}
	}
	return us
}

// withWindow adds u's window to a config made from walCrashConfig.
func (u upstreamBroker) withWindow(tmpl string) string {
	const topic = `topic    = "results/${device_id}/${pipeline}/${key}"`
	return strings.Replace(tmpl, topic, topic+u.window, 1)
}

// TestCrash_WALSinkExactlyOnce is the write-ahead-log sink's chaos test:
// results published upstream at QoS 2 through the sink's own session, the
// agent SIGKILLed at random moments (some while it publishes its backlog)
// and the upstream broker restarted: the collector receives every result
// exactly once, in order per key, equal to an uninterrupted run. A broker
// that loses its sessions when restarted (aedes, the embedded broker:
// memoryUpstream) delivers a flow still open at its restart a second time;
// each such repeat is proven the broker's, any other fails the test.
func TestCrash_WALSinkExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, u := range upstreamBrokers {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			testCrashWALSink(t, u)
		})
	}
}

// TestCrash_WALSinkQoS1 is TestCrash_WALSinkExactlyOnce for a broker without
// QoS 2 (mosquitto with max_qos 1 and its default in-flight limit) and the
// sink at qos = 1, with 8 kills: every result arrives, right, in order per
// key (first receipts); repeats are byte-identical (same id) and at most the
// in-flight window per crash or upstream reconnect.
func TestCrash_WALSinkQoS1(t *testing.T) {
	t.Parallel()
	testCrashWALSink(t, upstreamBroker{name: "upstream_max_qos_1", qos1: true, window: "\n  qos = 1",
		opts: []mosquitto.Option{mosquitto.DefaultInflight(), mosquitto.Conf("max_qos 1")}})
}

func testCrashWALSink(t *testing.T, u upstreamBroker) {
	readings, devices, kills := crashScale()
	if u.qos1 {
		kills = max(kills, 8)
	}
	in := mosquitto.Start(t)
	var up upstream
	if u.start != nil {
		up = u.start(t)
	} else {
		up = mosquittoUpstream{mosquitto.Start(t, u.opts...)}
	}
	col := newCollector(t, up.collectorURL(), "results/#")

	run := func(device, url string) *mqttCrashRun {
		return newCrashRun(t, u.withWindow(walCrashConfig), "%DEVICE%", device, "%BROKER%", in.URL(), "%UPSTREAM%", url)
	}
	// Every window fires (publishReadings ends with a flush reading):
	// wait for as many as the readings make.
	windows := len(expectedWindows(readings, devices))
	settle := func(device string) map[string]string {
		await.True(t, 3*time.Minute, `col.windowCount(device) >= windows`, func() bool { return col.windowCount(device) >= windows })
		return col.windows(device)
	}

	clean := run("clean", up.collectorURL())
	clean.start()
	publishReadings(t, in.URL(), "pub-clean", readings, devices, func(int) {})
	want := settle("clean")
	clean.stop()
	if len(want) < devices {
		t.Fatalf("uninterrupted run delivered %d windows", len(want))
	}

	crashed := run("crashed", up.sinkURL())
	crashed.start()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	batches := readings / 1000
	killAt := map[int]bool{}
	for len(killAt) < kills {
		killAt[(1+rng.IntN(batches-1))*1000] = true
	}
	restartAt := map[int]bool{(1 + rng.IntN(batches-1)) * 1000: true, (1 + rng.IntN(batches-1)) * 1000: true}
	outageAt := (1 + rng.IntN(batches-1)) * 1000
	outage := 3 * time.Second
	if os.Getenv("EDDY_CRASH_LONG") != "" {
		outage = 30 * time.Second
	}
	var upMu sync.Mutex // the broker handle is not safe for concurrent use
	outageOver := make(chan struct{})
	publishReadings(t, in.URL(), "pub-crashed", readings, devices, func(i int) {
		if restartAt[i] {
			upMu.Lock()
			up.restart(col) // SIGTERM: mosquitto keeps its QoS 2 sessions
			upMu.Unlock()
		}
		if i == outageAt {
			// The uplink is unreachable for a while: results wait in the
			// WAL, readings keep flowing in.
			upMu.Lock()
			up.stop(col)
			upMu.Unlock()
			go func() {
				defer close(outageOver)
				time.Sleep(outage) // pacing: the outage's length
				upMu.Lock()
				up.restart(col)
				upMu.Unlock()
			}()
		}
		if killAt[i] {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // pacing: a random kill moment
			crashed.kill()
			crashed.start()
		}
	})
	<-outageOver
	// One more kill while the backlog drains.
	time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond) // pacing: a random kill moment
	crashed.kill()
	crashed.start()
	got := settle("crashed")
	crashed.stop()

	allowed := up.brokerRepeats(t, col, "crashed")
	col.mu.Lock()
	all, reps, ooo, changed := col.duplicates, col.brokerReps, col.outOfOrder, col.changed
	col.mu.Unlock()
	// Repeats the broker's own record proves it made are not the sink's.
	var dups []string
	byBroker := 0
	for _, n := range allowed {
		byBroker += n
	}
	for _, id := range all {
		if allowed[id] > 0 {
			allowed[id]--
			continue
		}
		dups = append(dups, id)
	}
	// Each kill, upstream restart and the outage may cost one window of
	// repeats at QoS 1.
	maxRepeats := 0
	if u.qos1 {
		maxRepeats = 20 * (kills + 1 + len(restartAt) + 1)
		t.Logf("QoS 1: %d repeats (at most %d allowed: %d crashes or reconnects × window 20)", len(dups), maxRepeats, maxRepeats/20)
	}
	if len(dups) > maxRepeats {
		t.Errorf("%d duplicated results (by id), at most %d allowed, e.g. %v", len(dups), maxRepeats, dups[:min(5, len(dups))])
	}
	if len(changed) > 0 {
		t.Errorf("%d repeats with a different payload than the first receipt, e.g. %v", len(changed), changed[:min(5, len(changed))])
	}
	if len(ooo) > 0 {
		t.Errorf("%d results out of order per key, e.g. %v", len(ooo), ooo[:min(5, len(ooo))])
	}
	diff := differingWindows(t, want, got)
	if len(got) != len(want) {
		t.Errorf("%d windows delivered, want %d", len(got), len(want))
	}
	if diff > 0 || t.Failed() {
		t.Fatalf("%d of %d windows differ", diff, len(want))
	}
	t.Logf("%d readings, %d kills, %d upstream restarts and a %v outage: %d windows delivered, %d repeated by the sink (%d broker-side repeats marked DUP ignored; %d repeats made by a restarted broker that had lost the session, proven by brokerRepeats)",
		readings, kills+1, len(restartAt), outage, len(want), len(dups), reps, byBroker)
}
