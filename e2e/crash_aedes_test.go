package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/aedes"
	"github.com/eddy-edge/eddy/scripts/await"
)

// aedes (scripts/aedes) resumes a persistent session by restoring the
// subscription first and sending its stored messages after: live readings
// overtake the backlog the agent missed while it was down. These tests run
// the real binary against it with the readings' event time following the
// publishing pace, so the backlog is behind the watermark the live readings
// push ahead.

const aedesCrashConfig = `
agent {
  device_id   = "aedes"
  data_dir    = "%DATA%"
  admin       = "%ADMIN%"
  parallelism = 2
}
source "mqtt" "sensors" {
  broker    = "%BROKER%"
  client_id = "eddy-aedes"
  topics    = ["sensors/+/telemetry"]
  qos       = 1
  # aedes keeps no in-flight window: what it may send again is whatever the
  # agent received and had not acknowledged, which under this load reached
  # 1,219 messages (the default 1,000 did not cover it).
  max_inflight = 10000
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "1s"
    %HOLD%
  }
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
sink "file" "late" {
  path     = "%DIR%/late"
  delivery = "exactly_once"
}
pipeline "sums" {
  from        = source.mqtt.sensors
  key         = event.device
  window "tumbling" { size = "1s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
  }
  to          = [sink.file.out]
  late_output = sink.file.late
}
checkpoint { interval = "200ms" }
`

// aedesQuiet is how long aedes and the agent exchange no message before a
// test takes aedes to be done sending: longer than the agent's reconnect
// (1 s) after aedes closes its connection, and than a pause of a loaded
// aedes within its stored messages.
const aedesQuiet = 10 * time.Second

// The WARN the agent logs once per burst of late readings after a resume.
const resumedWarn = "readings late after the broker resumed the session"

// pacedReading is reading j of a paced run: event time follows the
// publishing pace (rate per second) with up to 0.5 s of jitter, inside the
// 1 s out-of-orderness bound; seq identifies it in the late output.
func pacedReading(rng *rand.Rand, j, devices, rate int) (device int, ts int64, v int, payload string) {
	device = j % devices
	ts = int64(1_700_000_000_000) + int64(j)*1000/int64(rate) + rng.Int64N(500)
	v = rng.IntN(100)
	payload = `{"device":"dev-` + strconv.Itoa(device) + `","seq":` + strconv.Itoa(j) + `,"ts":` + strconv.FormatInt(ts, 10) + `,"v":` + strconv.Itoa(v) + `}`
	return device, ts, v, payload
}

// pacedWindows is the uninterrupted result of a paced run: per (key,
// window) "n=… sum=…", as lastFirings reads it.
func pacedWindows(readings, devices, rate int) map[string]string {
	rng := rand.New(rand.NewPCG(21, 22))
	type acc struct{ n, sum int }
	m := map[string]*acc{}
	for j := 0; j < readings; j++ {
		d, ts, v, _ := pacedReading(rng, j, devices, rate)
		start := ts - ((ts%1000)+1000)%1000
		k := fmt.Sprintf("dev-%d/%v-%v", d, float64(start), float64(start+1000))
		if m[k] == nil {
			m[k] = &acc{}
		}
		m[k].n++
		m[k].sum += v
	}
	out := map[string]string{}
	for k, a := range m {
		out[k] = fmt.Sprintf("n=%d sum=%d", a.n, a.sum)
	}
	return out
}

// sendPaced publishes readings at QoS 1 at rate per second (in ticks of
// 10 ms), then a flush reading an hour ahead so every window fires. It
// stores how many are published in sent. It keeps its pace while the agent
// is down, as sensors do: the broker stores what the agent misses.
func sendPaced(url string, readings, devices, rate int, sent *atomic.Int64) error {
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("pub").SetMaxResumePubInFlight(1000))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	rng := rand.New(rand.NewPCG(21, 22))
	perTick := max(rate/100, 1)
	start := time.Now()
	var toks []paho.Token
	for j := 0; j < readings; j++ {
		d, _, _, payload := pacedReading(rng, j, devices, rate)
		toks = append(toks, pub.Publish("sensors/"+strconv.Itoa(d)+"/telemetry", 1, false, payload))
		if (j+1)%perTick == 0 {
			if due := start.Add(time.Duration(j+1) * time.Second / time.Duration(rate)); time.Until(due) > 0 {
				time.Sleep(time.Until(due)) // pacing: the publisher's rate, not a wait on the agent
			}
		}
		if (j+1)%1000 == 0 {
			for _, tok := range toks {
				if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
					return fmt.Errorf("publish: %v", tok.Error())
				}
			}
			toks = toks[:0]
			sent.Store(int64(j + 1))
		}
	}
	flush := fmt.Sprintf(`{"device":"flush","seq":-1,"ts":%d,"v":0}`, int64(1_700_000_000_000)+int64(readings)*1000/int64(rate)+3_600_000)
	if tok := pub.Publish("sensors/flush/telemetry", 1, false, flush); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publish flush: %v", tok.Error())
	}
	sent.Store(int64(readings))
	return nil
}

// lateRecord is one reading of the committed late output.
type lateRecord struct {
	seq    int
	detail string
	key    string // device/window, as lastFirings
	v      int
	offset uint64 // in the ingest log
}

// committedLate reads the late output's committed part files. A reading in
// it more often than copies allows (1 unless aedes sent it again after its
// ack, by the packet trace) fails the test.
func committedLate(t *testing.T, dir string, copies func(seq int) int) []lateRecord {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var out []lateRecord
	seen := map[int][]uint64{}
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var dl struct {
				Reason, Detail, Payload string
				Offset                  uint64
			}
			var r struct {
				Device string
				Seq    int
				TS     int64
				V      int
			}
			if json.Unmarshal(sc.Bytes(), &dl) != nil || json.Unmarshal([]byte(dl.Payload), &r) != nil {
				t.Fatalf("%s: bad late record %q", n, sc.Text())
			}
			seen[r.Seq] = append(seen[r.Seq], dl.Offset)
			if len(seen[r.Seq]) > copies(r.Seq) {
				// Two offsets: the ingest log took a re-send as new.
				t.Fatalf("reading %d %d times in the late output (ingest log offsets %v)", r.Seq, len(seen[r.Seq]), seen[r.Seq])
			}
			start := r.TS - ((r.TS%1000)+1000)%1000
			out = append(out, lateRecord{seq: r.Seq, detail: dl.Detail, key: fmt.Sprintf("%s/%v-%v", r.Device, float64(start), float64(start+1000)), v: r.V, offset: dl.Offset})
		}
		f.Close()
	}
	return out
}

// aedesScale is the size of the late-backlog test: CI's, or the long one
// with EDDY_CRASH_LONG=1 (scripts/crash-long.sh).
func aedesScale() (readings, devices, rate, kills int) {
	if os.Getenv("EDDY_CRASH_LONG") != "" {
		return 200_000, 1000, 10_000, 5
	}
	return 40_000, 1000, 5_000, 3
}

// aedesCrash runs the paced workload through aedes into an agent SIGKILLed
// kills times, spread over the run, each time restarted once 1 s worth of
// readings more were published (a device restarting, while its sensors go
// on: the broker stores them, a backlog longer than the out-of-orderness
// bound with the reconnect), and returns the run, the
// committed windows (the flush reading's left out) and every run's output.
// The agent reaches aedes through an mqttProxy. sample, if set, is called
// before each kill and before the final stop (final).
func aedesCrash(t *testing.T, hold string, readings, devices, rate, kills int, sample func(r *mqttCrashRun, p *mqttProxy, final bool)) (*mqttCrashRun, map[string]string, string, brokerFaults) {
	b := aedes.Start(t)
	trace := ""
	if os.Getenv("EDDY_AEDES_TRACE") != "" {
		trace = filepath.Join(b.Dir(), "trace.txt")
	}
	proxy := startMQTTProxy(t, b.Addr(), trace)
	r := newCrashRun(t, aedesCrashConfig, "%BROKER%", proxy.URL(), "%HOLD%", hold)
	keepOnFailure(t, proxy, r.dir, b.Dir())
	r.start()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	segment := readings / (kills + 1)
	outage := (rate + 999) / 1000 * 1000 // sent counts in 1,000s
	var killAt []int
	for k := 1; k <= kills; k++ {
		killAt = append(killAt, (k*segment+rng.IntN(segment/2)-segment/4)/1000*1000)
	}
	var logs strings.Builder
	var sent atomic.Int64
	published := make(chan error, 1)
	began := time.Now()
	go func() { published <- sendPaced(b.URL(), readings, devices, rate, &sent) }()
	for _, at := range killAt {
		await.True(t, 120*time.Second, `sent.Load() >= int64(at)`, func() bool { return sent.Load() >= int64(at) })
		if sample != nil {
			sample(r, proxy, false)
		}
		r.kill()
		proxy.toLose.Store(0) // the next process's acks reach the broker
		logs.WriteString(r.p.output())
		await.True(t, 120*time.Second, `sent.Load() >= int64(at+outage)`, func() bool { return sent.Load() >= int64(at+outage) })
		r.start()
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d readings in %v", readings, time.Since(began).Round(time.Millisecond))
	// Every reading aedes sends ends in a committed window or the late
	// output. aedes decides when it sends its stored messages (under load,
	// tens of seconds after the live ones), and a reading it has not sent
	// yet is not one it lost: first wait until it has sent nothing for
	// aedesQuiet to the connected agent, and the agent has acknowledged
	// nothing for as long (what it received is logged), then until the results hold every reading
	// the packet trace does not prove aedes lost. (The windows' n are last
	// firings, so a window's late updates are in them.)
	total := func() int {
		// Counted only: which copies are allowed is known at the end.
		n := len(committedLate(t, filepath.Join(r.dir, "late"), func(int) int { return math.MaxInt }))
		for k, s := range lastFirings(t, filepath.Join(r.dir, "out")) {
			var c, sum float64
			if _, err := fmt.Sscanf(s, "n=%g sum=%g", &c, &sum); err == nil && k != "" {
				n += int(c)
			}
		}
		return n
	}
	settled := func() error {
		if q := proxy.quiet(); q < aedesQuiet || !proxy.open() {
			// Quiet only counts with the agent connected: aedes sends
			// nothing to a session without a connection.
			return fmt.Errorf("aedes and the agent exchanged messages %v ago (connected: %v)", q.Round(time.Millisecond), proxy.open())
		}
		need := aedesFaults(proxy.Events(), readings).countedAtLeast(readings)
		if got := total(); got < need {
			return fmt.Errorf("%d of %d readings in the committed windows and the late output", got, need)
		}
		return nil
	}
	if err := await.Within(300*time.Second, settled); err != nil {
		t.Error(err)
	}
	if sample != nil {
		sample(r, proxy, true)
	}
	r.stop()
	logs.WriteString(r.p.output())
	got := lastFirings(t, filepath.Join(r.dir, "out"))
	if r.starts != kills+1 {
		t.Fatalf("%d starts, want %d", r.starts, kills+1)
	}
	return r, got, logs.String(), aedesFaults(proxy.Events(), readings)
}

// TestCrash_AedesResumedBacklogLate: without a hold, every reading is either
// in its window or in the late output, exactly once; the late ones are all
// the resumed sessions' backlog (their own detail), and the agent says so in
// a WARN naming the remedy.
func TestCrash_AedesResumedBacklogLate(t *testing.T) {
	t.Parallel()
	readings, devices, rate, kills := aedesScale()
	r, got, logs, faults := aedesCrash(t, "", readings, devices, rate, kills, nil)
	late := committedLate(t, filepath.Join(r.dir, "late"), faults.copies)
	// Put each late reading back into its window: the sum is the
	// uninterrupted result.
	type acc struct{ n, sum int }
	merged := map[string]*acc{}
	for k, s := range got {
		var a acc
		var n, sum float64
		if _, err := fmt.Sscanf(s, "n=%g sum=%g", &n, &sum); err != nil {
			t.Fatalf("%s: %q: %v", k, s, err)
		}
		a.n, a.sum = int(n), int(sum)
		merged[k] = &a
	}
	resumed := 0
	for _, l := range late {
		if !strings.Contains(l.detail, "resumed the session") {
			t.Errorf("reading %d late for another reason: %q", l.seq, l.detail)
		}
		resumed++
		if merged[l.key] == nil {
			merged[l.key] = &acc{}
		}
		merged[l.key].n++
		merged[l.key].sum += l.v
	}
	gotMerged := map[string]string{}
	for k, a := range merged {
		gotMerged[k] = fmt.Sprintf("n=%d sum=%d", a.n, a.sum)
	}
	warns := strings.Count(logs, resumedWarn)
	t.Logf("%d readings late after resumes, %d WARNs", resumed, warns)
	sameAedesWindows(t, faults, readings, devices, rate, gotMerged, kills)
	if resumed > 0 && warns == 0 {
		t.Fatalf("%d readings late after resumes, no WARN %q", resumed, resumedWarn)
	}
	if warns > 0 && !strings.Contains(logs, "hold_after_resume") {
		t.Fatalf("the WARN names no remedy")
	}
	t.Logf("%d readings at %d/s, %d kills: %d late after resumes (%d WARNs), every reading aedes did not lose or send again after its ack in its window or the late output once",
		readings, rate, kills, resumed, warns)
}

// TestCrash_AedesResumedBacklogHold: with watermark { hold_after_resume },
// the watermark waits for the backlog after each resume: the committed
// windows are the uninterrupted run's, nothing is late.
func TestCrash_AedesResumedBacklogHold(t *testing.T) {
	t.Parallel()
	readings, devices, rate, kills := aedesScale()
	// The hold lasts at most ten times its value. In the long form, on a
	// loaded 2-core machine, aedes sent stored messages up to 60 s into a
	// connection: past the 30 s of a 3 s hold.
	hold := "3s"
	if readings > 100_000 {
		hold = "10s"
	}
	r, got, logs, faults := aedesCrash(t, `hold_after_resume = "`+hold+`"`, readings, devices, rate, kills, nil)
	if late := committedLate(t, filepath.Join(r.dir, "late"), faults.copies); len(late) > 0 {
		t.Errorf("%d readings late with the hold", len(late))
	}
	sameAedesWindows(t, faults, readings, devices, rate, got, kills)
	if strings.Contains(logs, resumedWarn) {
		t.Fatalf("WARN %q with the hold", resumedWarn)
	}
	t.Logf("%d readings at %d/s, %d kills, hold %s: %d windows as the uninterrupted run's, but for what aedes itself lost or sent again after its ack", readings, rate, kills, hold, len(got))
}

// TestCrash_AedesRedeliveries: 30,000 readings at 1,000/s from 1,000 devices,
// 5 SIGKILLs: every window exact (but for what aedes itself loses or sends
// again after its ack: sameAedesWindows), the messages aedes sends again after a
// resume (without DUP, behind live messages) recognised by the ingest log
// and counted in eddy_ingest_redeliveries_dropped_total. Before each kill
// the proxy swallows the agent's next 100 acks, as a process killed right
// after writing them loses them: aedes must send those logged readings
// again. (Without that, at this rate the agent acks each commit within
// milliseconds, and a kill rarely finds a logged reading unacknowledged:
// what aedes re-sends had not been logged, and is rightly kept.) Only 100,
// then acks pass again: aedes keeps no in-flight window, so what it may
// send again is bounded only by what the agent has not acknowledged, and
// the re-send rule takes the last max_inflight of a connection.
func TestCrash_AedesRedeliveries(t *testing.T) {
	t.Parallel()
	const readings, devices, rate, kills = 30_000, 1000, 1000, 5
	const metric = `eddy_ingest_redeliveries_dropped_total{source="sensors"}`
	dropped := 0.0
	var held int64
	r, got, _, faults := aedesCrash(t, `hold_after_resume = "3s"`, readings, devices, rate, kills, func(r *mqttCrashRun, p *mqttProxy, final bool) {
		defer func() { held = p.held.Load() }()
		if !final {
			from := p.held.Load()
			p.loseAcks(100)
			await.True(t, 30*time.Second, `p.held.Load() >= from+100`, func() bool { return p.held.Load() >= from+100 })
		}
		if v := metricValue(t, r.admin, metric); v > 0 {
			dropped += v
		}
	})
	if late := committedLate(t, filepath.Join(r.dir, "late"), faults.copies); len(late) > 0 {
		t.Errorf("%d readings late with the hold", len(late))
	}
	sameAedesWindows(t, faults, readings, devices, rate, got, kills)
	// Logged readings whose acks were lost came back: each one is dropped
	// (the windows above are exact), and counted.
	if dropped == 0 {
		t.Fatalf("no redelivery counted in %s over %d kills with %d acks lost", metric, kills, held)
	}
	t.Logf("%d readings at %d/s, %d kills: every reading aedes did not lose or send again after its ack counted exactly once, %d acks lost with the process, %v redeliveries dropped", readings, rate, kills, held, dropped)
}

// windowBounds is a window's allowed result when the broker lost or
// duplicated readings in it.
type windowBounds struct{ nLo, nHi, sumLo, sumHi int }

// sameAedesWindows compares got with the uninterrupted run: exactly, unless
// the packet trace proved aedes lost or duplicated readings; then each
// window's count and sum must lie within what those readings allow, and
// every other reading still counts exactly once.
func sameAedesWindows(t *testing.T, f brokerFaults, readings, devices, rate int, got map[string]string, kills int) {
	t.Helper()
	if f.exact() {
		sameWindows(t, pacedWindows(readings, devices, rate), got, kills)
		return
	}
	t.Logf("aedes, by the packet trace: %d acks taken for another message with the same packet id, %d readings removed from the session by them (%d readings never reached the agent at all); %d sent again on the connection their ack had reached; %d sent again on a later connection with the id of an ack aedes had read (that ack removed a message whose id never reached the wire); %d readings allowed a second copy",
		f.collisions, f.removed, f.undelivered, f.again, f.unseen, f.kept)
	rng := rand.New(rand.NewPCG(21, 22))
	want := map[string]*windowBounds{}
	for j := 0; j < readings; j++ {
		d, ts, v, _ := pacedReading(rng, j, devices, rate)
		start := ts - ((ts%1000)+1000)%1000
		k := fmt.Sprintf("dev-%d/%v-%v", d, float64(start), float64(start+1000))
		if want[k] == nil {
			want[k] = &windowBounds{}
		}
		lo, hi := 1, 1
		if l, ok := f.lo[j]; ok {
			lo, hi = l, f.hi[j]
		}
		b := want[k]
		b.nLo, b.nHi, b.sumLo, b.sumHi = b.nLo+lo, b.nHi+hi, b.sumLo+lo*v, b.sumHi+hi*v
	}
	diff := 0
	for k, b := range want {
		var n, sum float64
		if s, ok := got[k]; ok {
			if _, err := fmt.Sscanf(s, "n=%g sum=%g", &n, &sum); err != nil {
				t.Fatalf("%s: %q: %v", k, s, err)
			}
		}
		if int(n) < b.nLo || int(n) > b.nHi || int(sum) < b.sumLo || int(sum) > b.sumHi {
			if diff < 10 {
				t.Errorf("%s: got %q, want n in [%d, %d], sum in [%d, %d]", k, got[k], b.nLo, b.nHi, b.sumLo, b.sumHi)
			}
			diff++
		}
	}
	for k := range got {
		if want[k] == nil {
			t.Errorf("%s: extra window %q", k, got[k])
		}
	}
	if diff > 0 {
		t.Fatalf("%d of %d windows outside what aedes' own losses and duplicates allow after %d kills", diff, len(want), kills)
	}
}

// countedAtLeast is how many readings must be in the results at least.
func (f brokerFaults) countedAtLeast(readings int) int {
	n := readings
	for _, lo := range f.lo {
		n -= 1 - lo
	}
	return n
}

// copies is how often reading seq may be in the results at most.
func (f brokerFaults) copies(seq int) int {
	if hi, ok := f.hi[seq]; ok {
		return hi
	}
	return 1
}
