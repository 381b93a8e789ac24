package e2e

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/rabbitmq"
)

// rabbitPrefetch is RabbitMQ's per-subscriber window as docs/upstream.md
// tells users to set it: mqtt.prefetch = 1000 in rabbitmq.conf, equal to
// the source's max_inflight (its default, 1000). The default of 10 caps
// ingest at about 10 readings per fsynced commit.
const rabbitPrefetch = 1000

// sendSeqReadings publishes the readings of sendReadings (same devices,
// timestamps and values, so expectedWindows holds) with their index as
// "seq", to root/DEVICE/telemetry, in batches of 1,000 whose PUBACKs it
// waits for; sent counts the readings acknowledged by the broker. It does
// not wait for the agent: RabbitMQ queues what the agent has not taken,
// while it is down too.
func sendSeqReadings(url, client, root string, readings, devices int, sent *atomic.Int64) error {
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(client).SetMaxResumePubInFlight(1000))
	if tok := pub.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	rng := rand.New(rand.NewPCG(11, 12))
	base := int64(1_700_000_000_000)
	const batch = 1000
	for i := 0; i < readings; i += batch {
		var toks []paho.Token
		for j := i; j < i+batch && j < readings; j++ {
			d := j % devices
			ts := base + int64(j)*5 + rng.Int64N(3000)
			payload := `{"device":"dev-` + strconv.Itoa(d) + `","seq":` + strconv.Itoa(j) + `,"ts":` + strconv.FormatInt(ts, 10) + `,"v":` + strconv.Itoa(rng.IntN(100)) + `}`
			toks = append(toks, pub.Publish(root+"/"+strconv.Itoa(d)+"/telemetry", 1, false, payload))
		}
		for _, tok := range toks {
			if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
				return fmt.Errorf("publish: %v", tok.Error())
			}
		}
		sent.Store(int64(min(i+batch, readings)))
	}
	flush := fmt.Sprintf(`{"device":"flush","seq":-1,"ts":%d,"v":0}`, base+int64(readings)*5+3_600_000)
	if tok := pub.Publish(root+"/flush/telemetry", 1, false, flush); !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publish flush: %v", tok.Error())
	}
	return nil
}

// rabbitResends is what the proxy's packet trace shows of RabbitMQ's
// re-sends: a reading it sent to the agent again on a later connection.
type rabbitResends struct {
	connections int // the agent's connections
	resumed     int // of them, CONNACK session present = 1
	resends     int // readings sent again on a later connection
	withDUP     int // of them, with the DUP flag
	firstDUP    int // readings with DUP never sent to the agent before: 0 expected
	// afterNew counts re-sends that came after a reading new to the agent
	// on the same connection: 0 if RabbitMQ sends its requeued messages
	// first.
	afterNew int
	// outOfOrder counts re-sends whose seq is below the previous re-send's
	// on the same connection (the publisher's order is seq order).
	outOfOrder int
	// skipped counts re-sends on a later connection than the next after
	// the one the reading was last sent on.
	skipped  int
	sameConn int // readings sent twice on one connection: 0 expected
}

func (r rabbitResends) String() string {
	return fmt.Sprintf("%d connections (%d resumed), %d readings sent again on a later connection, %d of them with DUP, %d after a new reading, %d out of seq order, %d not on the next connection; %d first sends with DUP, %d sent twice on one connection",
		r.connections, r.resumed, r.resends, r.withDUP, r.afterNew, r.outOfOrder, r.skipped, r.firstDUP, r.sameConn)
}

// readRabbitResends reads the proxy's trace file (mqttProxy.trace's
// format): every PUBLISH the broker wrote to the agent, reached it or not
// (B>X: written after the agent had gone, so sent as far as the broker
// knows).
func readRabbitResends(t *testing.T, path string) rabbitResends {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r rabbitResends
	seenOn := map[int]int{} // seq → the connection it was first sent on
	conn, lastResend, sawNew := 0, -1, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		c, _ := strconv.Atoi(strings.TrimPrefix(fs[1], "c"))
		if c != conn {
			conn, lastResend, sawNew = c, -1, false
		}
		if fs[2] == "B>A" && fs[3] == "CONNACK" {
			r.connections++
			if fs[4] == "sp=1" {
				r.resumed++
			}
			continue
		}
		if (fs[2] != "B>A" && fs[2] != "B>X") || fs[3] != "PUBLISH" || len(fs) < 7 {
			continue
		}
		dup := fs[5] == "dup=1"
		seq, err := strconv.Atoi(strings.TrimPrefix(fs[6], "seq="))
		if err != nil || seq < 0 {
			continue
		}
		first, seen := seenOn[seq]
		switch {
		case !seen:
			seenOn[seq] = c
			sawNew = true
			if dup {
				r.firstDUP++
			}
		case first == c:
			r.sameConn++
		default:
			r.resends++
			if dup {
				r.withDUP++
			}
			if sawNew {
				r.afterNew++
			}
			if seq < lastResend {
				r.outOfOrder++
			}
			if first != c-1 {
				r.skipped++
			}
			lastResend = seq
			seenOn[seq] = c
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCrash_RabbitMQSource: RabbitMQ 3.10's MQTT plugin as the sensors'
// broker, set as docs/upstream.md says (mqtt.prefetch = 1000, the source's
// max_inflight). Sensors publish QoS 1 readings to it; the real binary reads
// them with its MQTT source (persistent session: RabbitMQ keeps a durable
// queue for it and stores what arrives while the agent is down) through a
// packet-tracing proxy, and is SIGKILLed at random points of the ingest,
// each time right after the proxy swallowed its last 100 PUBACKs (as a
// process killed right after writing them loses them): RabbitMQ must send
// those logged readings again. The committed windows equal an
// uninterrupted run's, every one; the re-sent readings are dropped and
// counted in eddy_ingest_redeliveries_dropped_total; nothing is
// dead-lettered.
//
// What the trace shows of RabbitMQ's re-sends (the test logs the counts):
// on the agent's next connection (session present) it sends every message
// of its window not acknowledged again, marked DUP, before any message new
// to the agent and in the order they were published (it puts them back at
// their place in the session's queue). Some of them it had not even written
// to the closed connection: they arrive with DUP on their first delivery,
// match nothing in the ingest log and are kept (counted in
// eddy_ingest_redeliveries_unmatched_total). DUP on every re-send is
// asserted, as the agent's documentation states it; the order is logged.
func TestCrash_RabbitMQSource(t *testing.T) {
	t.Parallel()
	readings, devices, kills := crashScale()
	const swallowed = 100 // PUBACKs lost with each killed process
	began := time.Now()
	b := rabbitmq.Start(t, "mqtt.prefetch = "+strconv.Itoa(rabbitPrefetch))
	t.Logf("RabbitMQ up in %v", time.Since(began).Round(time.Millisecond))

	// The uninterrupted run, on topics of its own.
	phase := time.Now()
	clean := newCrashRun(t, mqttCrashConfig, "%BROKER%", b.MQTTURL(), "%CLIENT%", "eddy-rabbit-clean",
		`"sensors/+/telemetry"`, `"clean/+/telemetry"`)
	clean.start()
	var cleanSent atomic.Int64
	if err := sendSeqReadings(b.MQTTURL(), "pub-rabbit-clean", "clean", readings, devices, &cleanSent); err != nil {
		t.Fatal(err)
	}
	want := clean.finalResults(len(expectedWindows(readings, devices)))
	if len(want) < devices {
		t.Fatalf("uninterrupted run produced %d windows", len(want))
	}
	t.Logf("uninterrupted run: %d readings, %d windows in %v", readings, len(want), time.Since(phase).Round(time.Millisecond))

	phase = time.Now()
	trace := filepath.Join(t.TempDir(), "trace.txt")
	proxy := startMQTTProxy(t, b.Addr(), trace)
	r := newCrashRun(t, mqttCrashConfig, "%BROKER%", proxy.URL(), "%CLIENT%", "eddy-rabbit")
	r.start()
	var sent atomic.Int64
	published := make(chan error, 1)
	go func() { published <- sendSeqReadings(b.MQTTURL(), "pub-rabbit", "sensors", readings, devices, &sent) }()

	const (
		offsetMetric    = `eddy_ingest_log_last_offset{source="sensors"}`
		droppedMetric   = `eddy_ingest_redeliveries_dropped_total{source="sensors"}`
		unmatchedMetric = `eddy_ingest_redeliveries_unmatched_total{source="sensors"}`
	)
	var dropped, unmatched float64
	deadLettered := uint64(0)
	// sample adds the current process's counters (each process counts from
	// zero) before it is killed or stopped.
	sample := func() {
		dropped += max(metricValue(t, r.admin, droppedMetric), 0)
		unmatched += max(metricValue(t, r.admin, unmatchedMetric), 0)
		for _, st := range r.p.status(t) {
			deadLettered += st.DeadLettered
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	segment := readings / (kills + 1)
	for k := 1; k <= kills; k++ {
		at := float64(k*segment + rng.IntN(segment/2) - segment/4)
		await.True(t, 120*time.Second, `metricValue(t, r.admin, offsetMetric) >= at`, func() bool { return metricValue(t, r.admin, offsetMetric) >= at })
		from := proxy.held.Load()
		proxy.loseAcks(swallowed)
		await.True(t, 60*time.Second, `proxy.held.Load() >= from+swallowed`, func() bool { return proxy.held.Load() >= from+swallowed })
		sample()
		r.kill()
		r.start()
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	r.waitResults(len(want))
	sample()
	r.stop()
	got := lastFirings(t, filepath.Join(r.dir, "out"))
	delete(got, "")
	took := time.Since(phase)
	if r.starts != kills+1 {
		t.Fatalf("%d starts, want %d", r.starts, kills+1)
	}
	proxy.flush()
	rs := readRabbitResends(t, trace)
	t.Logf("RabbitMQ's re-sends, by the packet trace: %v", rs)
	sameWindows(t, want, got, kills)
	held := proxy.held.Load()
	if deadLettered != 0 {
		t.Errorf("%d readings dead-lettered", deadLettered)
	}
	// Every swallowed ack is a logged reading RabbitMQ sends again: the
	// windows above are exact, so each was dropped; all are counted.
	if dropped < float64(held) {
		t.Errorf("%v redeliveries dropped (%s), fewer than the %d acks lost with the processes", dropped, droppedMetric, held)
	}
	if rs.resends < int(held) || rs.connections < kills+1 || rs.resumed != rs.connections-1 {
		t.Errorf("trace: %v; want at least the %d swallowed acks' readings sent again, at least %d connections, all but the first resumed", rs, held, kills+1)
	}
	// The agent drops re-sends either way; docs/upstream.md says RabbitMQ
	// marks them, which this holds it to.
	if rs.withDUP != rs.resends || rs.sameConn != 0 {
		t.Errorf("trace: %v; want every re-send marked DUP, none on the connection it was first sent on", rs)
	}
	t.Logf("%d readings from %d devices through RabbitMQ (mqtt.prefetch = %d), %d kills in %v: %d windows identical to the uninterrupted run, no duplicate records; %d acks lost with the processes, %v redeliveries dropped, %v DUP re-sends unmatched, nothing dead-lettered",
		readings, devices, rabbitPrefetch, kills, took.Round(time.Millisecond), len(want), held, dropped, unmatched)
}
