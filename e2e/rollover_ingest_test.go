package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// The readings of an ingestDevice: ingestDevices sensors, one reading each
// every ingestStepMs of event time for ingestSpanMs, each up to 4 s late
// (within the 5 s watermark bound: none is late for its window).
const (
	ingestDevices  = 4
	ingestStepMs   = 250
	ingestSpanMs   = 120_000
	ingestBeforeMs = 25_000 // event time of the readings the checkpoint covers
)

// ingestDevice reads its readings from its embedded broker, through the
// ingest log: a sensor publishes them over MQTT at QoS 1, each
// acknowledged once the log holds it.
type ingestDevice struct {
	addr string // the embedded broker's listener
	rs   []rollReading
	// topics and payloads are the readings' messages, then a reading an
	// hour later that makes every window of theirs fire.
	topics, payloads []string
	// before are the readings the checkpoint covers, logged those after
	// them in the ingest log when the device stopped; the rest come while
	// the changed configuration runs.
	before, logged int
	clients        int
}

func newIngestDevice(t *testing.T) *ingestDevice {
	d := &ingestDevice{addr: loopback.Addr(t)}
	rng := rand.New(rand.NewPCG(31, 32))
	for j := range ingestSpanMs / ingestStepMs * ingestDevices {
		r := rollReading{device: "dev-" + strconv.Itoa(j%ingestDevices), ts: d.nominal(j) + rng.Int64N(4000), v: int64(rng.IntN(100))}
		d.rs = append(d.rs, r)
		d.topics = append(d.topics, "sensors/"+strconv.Itoa(j%ingestDevices)+"/telemetry")
		d.payloads = append(d.payloads, fmt.Sprintf(`{"device":%q,"ts":%d,"v":%d}`, r.device, r.ts, r.v))
	}
	d.topics = append(d.topics, "sensors/flush/telemetry")
	d.payloads = append(d.payloads, fmt.Sprintf(`{"device":"flush","ts":%d,"v":50}`, d.nominal(len(d.rs))+3_600_000))
	return d
}

// nominal is the event time of reading j before its delay.
func (d *ingestDevice) nominal(j int) int64 {
	return 1_700_000_000_000 + int64(j/ingestDevices)*ingestStepMs
}

// upTo is the number of readings whose event time before their delay
// is before ms.
func (d *ingestDevice) upTo(ms int64) int {
	n := 0
	for n < len(d.rs) && d.nominal(n) < ms {
		n++
	}
	return n
}

// config is tmpl (crashConfig's source) reading the embedded broker,
// checkpointing every interval.
func (d *ingestDevice) config(t *testing.T, tmpl, interval string) string {
	t.Helper()
	cfg := replaceAll(tmpl, "source \"file\" \"in\" {\n  path = \"%DIR%/in.jsonl\"",
		"source \"mqtt\" \"in\" {\n  broker = \"embedded\"\n  topics = [\"sensors/+/telemetry\"]\n  qos    = 1",
		"source.file.in", "source.mqtt.in", `interval = "100ms"`, `interval = "`+interval+`"`)
	if !strings.Contains(cfg, `source "mqtt" "in"`) || !strings.Contains(cfg, `interval = "`+interval+`"`) {
		t.Fatal("crashConfig's source or checkpoint interval moved")
	}
	return "broker { listen = \"" + d.addr + "\" }\n" + cfg
}

// publish publishes messages from to to (exclusive) and returns once the
// agent has acknowledged them; the caller closes the sensor.
func (d *ingestDevice) publish(t *testing.T, from, to int) *reconnectingSensor {
	t.Helper()
	d.clients++
	s := newReconnectingSensor("tcp://"+d.addr, "rollover-sensor-"+strconv.Itoa(d.clients))
	if err := s.connect(); err != nil {
		t.Fatal(err)
	}
	if err := s.publish(d.topics[from:to], d.payloads[from:to]); err != nil {
		t.Fatal(err)
	}
	return s
}

// prepare runs twoPipelines on the first readings, stopped with SIGTERM
// (its final checkpoint holds their windows, still open); then again,
// without checkpoints (every hour), on the readings up to the cut, killed
// once they are in the ingest log.
func (d *ingestDevice) prepare(t *testing.T, dir string, tc rollCase) string {
	old := d.config(t, twoPipelines, "1h")
	p := startAgent(t, dir, old, `admin       = ""`, `admin       = "%ADMIN%"`)
	d.before = d.upTo(1_700_000_000_000 + ingestBeforeMs)
	s := d.publish(t, 0, d.before)
	await.True(t, 30*time.Second, "both pipelines read the first readings", func() bool {
		n := 0
		for _, st := range p.status(t) {
			if st.ReadingsIn >= uint64(d.before) {
				n++
			}
		}
		return n == 2
	})
	p.stop(syscall.SIGTERM, 30*time.Second)
	s.close()

	// The readings in the ingest log end before the cut: their delay
	// (under 4 s) stays within the watermark bound (5 s), so the old
	// definition cannot retire before the rest come.
	path := writeConfig(t, dir, d.config(t, tc.tmpl, "100ms"))
	stdout, _, _ := runSplit(t, "validate", "-c", path)
	_, cutText, cut := rolloverLine(t, stdout, tc.pipeline)
	d.logged = d.upTo(cut) - d.before
	if d.logged <= 0 || d.upTo(cut) == len(d.rs) {
		t.Fatalf("the cut %s leaves no reading in the ingest log or none after it", cutText)
	}
	p = startEddy(t, "run", "-c", writeConfig(t, dir, old))
	s = d.publish(t, d.before, d.before+d.logged)
	p.kill()
	s.close()
	path = writeConfig(t, dir, d.config(t, tc.tmpl, "100ms"))
	stdout, _, _ = runSplit(t, "validate", "-c", path)
	if _, again, _ := rolloverLine(t, stdout, tc.pipeline); again != cutText {
		t.Fatalf("the run on the old configuration took a checkpoint: the cut moved from %s to %s", cutText, again)
	}
	return path
}

// roll kills the first start a random moment after its first checkpoint,
// taken while both definitions run on the readings in the ingest log;
// the next start must resume the rollover, takes the rest of the readings
// and is killed a random moment after they are in the log; the last one
// runs until every result is committed, then stops on SIGTERM.
func (d *ingestDevice) roll(t *testing.T, path string, first []string, resumed string, done func() bool) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	p := startLogging(t, path, first...)
	if !p.waitLog("checkpoint completed", 30*time.Second) {
		t.Fatal("no checkpoint within 30 s")
	}
	if p.wait(time.Duration(rng.Int64N(int64(300 * time.Millisecond)))) {
		t.Fatalf("run exited: %v", p.err)
	}
	p.kill()

	p = startLogging(t, path, resumed)
	s := d.publish(t, d.before+d.logged, len(d.topics))
	if p.wait(time.Duration(rng.Int64N(int64(time.Second)))) {
		t.Fatalf("run exited: %v", p.err)
	}
	p.kill()
	s.close()

	p = startLogging(t, path, `msg="eddy started"`) // SIGTERM stops it gracefully from then on
	await.True(t, 60*time.Second, "every result committed", done)
	p.stop(syscall.SIGTERM, 20*time.Second)
}

func (d *ingestDevice) readings(*testing.T, string) []rollReading { return d.rs }

// TestRollover_RegionRestartExactlyOnce: on readings from the ingest log,
// an aggregate is added; while both definitions run, the new one's window
// subtask panics (debug_panic_at_offset: the first reading published after
// the rollover's first checkpoint, on the new side of the cut). Its
// failover region — both definitions, the other pipeline, the source and
// the sinks — restarts from the last checkpoint, taken during the
// rollover, and the run goes on: the old definition resumes with the same
// cut (the checkpoints after the restart record it, and its state), and
// the committed results, each exactly once, equal the reference.
func TestRollover_RegionRestartExactlyOnce(t *testing.T) {
	t.Parallel()
	tc := rollCases()[0]
	d := newIngestDevice(t)
	dir := t.TempDir()
	d.prepare(t, dir, tc)
	// Ingest log offsets count from 1.
	panicAt := d.before + d.logged + 1
	slowed := "  debug_delay_per_record = \"50us\"\n"
	tmpl := strings.Replace(tc.tmpl, slowed, slowed+"  debug_panic_at_offset = "+strconv.Itoa(panicAt)+"\n", 1)
	if tmpl == tc.tmpl || strings.Count(tc.tmpl, slowed) != 1 {
		t.Fatal("the pipeline block of sums moved")
	}
	tmpl += "restart {\n  strategy = \"fixed_delay\"\n  attempts = 3\n  delay    = \"100ms\"\n}\n"
	path := writeConfig(t, dir, d.config(t, tmpl, "100ms"))
	verdict, cut := validateRollover(t, path, tc)
	want := referenceFor(tc, d.rs, cut)

	p := startLogging(t, path, verdict.logged...)
	if !p.waitLog("checkpoint completed", 30*time.Second) {
		t.Fatal("no checkpoint within 30 s")
	}
	// The readings of the first second from the cut cannot move the
	// watermark past it: both definitions run when the first one fails.
	firstSecond := d.upTo(cut + 1000)
	s := d.publish(t, d.before+d.logged, firstSecond)
	defer s.close()
	if !p.waitLog("restarting from the last checkpoint", 30*time.Second) || !p.waitLog("pipelines restarted", 30*time.Second) {
		t.Fatal("the region did not restart")
	}
	failed := regexp.MustCompile(`pipelines failed: restarting from the last checkpoint" pipelines=(\S+)`).FindStringSubmatch(p.output())
	if failed == nil || !strings.Contains(failed[1], "sums--old-") || !strings.Contains(failed[1], "sums,") && !strings.HasSuffix(failed[1], "sums") {
		t.Fatalf("the restart does not name both definitions of sums: %q", failed)
	}
	restored := regexp.MustCompile(`msg="restored checkpoint" id=(\d+) pipelines=`).FindStringSubmatch(p.output())
	if restored == nil {
		t.Fatal("the region restart restored no checkpoint")
	}
	since, _ := strconv.ParseUint(restored[1], 10, 64)
	var roll struct {
		Old string
		Cut int64
	}
	var extra map[string][]byte
	await.True(t, 30*time.Second, "a checkpoint after the restart", func() bool {
		var id uint64
		id, extra = newestExtra(filepath.Join(dir, "data", "checkpoints"))
		return id > since
	})
	if err := json.Unmarshal(extra["rollover/sums"], &roll); err != nil {
		t.Fatalf("the checkpoint after the restart records no rollover of sums: %v", err)
	}
	if roll.Cut != cut || extra["shape/"+roll.Old] == nil {
		t.Fatalf("after the restart the old definition %q runs with the cut %d (its state recorded: %v), want %d",
			roll.Old, roll.Cut, extra["shape/"+roll.Old] != nil, cut)
	}

	s2 := d.publish(t, firstSecond, len(d.topics))
	defer s2.close()
	await.True(t, 60*time.Second, "every result committed", func() bool { return len(committedResults(t, dir)) >= len(want) })
	p.stop(syscall.SIGTERM, 20*time.Second)
	if c := strings.Count(p.output(), "restarting from the last checkpoint"); c != 1 {
		t.Errorf("%d restarts, want 1 (the injected panic)", c)
	}
	checkResults(t, committedResults(t, dir), want, cut, tc)
}

// newestExtra returns the id and extra records of the newest
// checkpoint manifest under root; 0 when there is none to read.
func newestExtra(root string) (uint64, map[string][]byte) {
	var id uint64
	var extra map[string][]byte
	for _, mi := range manifests(root) {
		b, err := os.ReadFile(mi.path)
		if err != nil {
			continue // removed by retention meanwhile
		}
		var m struct {
			ID    uint64
			Extra map[string][]byte
		}
		if json.Unmarshal(b, &m) == nil && m.ID > id {
			id, extra = m.ID, m.Extra
		}
	}
	return id, extra
}
