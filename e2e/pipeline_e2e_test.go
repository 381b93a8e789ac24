package e2e

// End-to-end tests of the real eddy binary against a real mosquitto broker.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

type totals struct {
	count         float64
	sum, min, max float64
}

// TestE2E_MQTTTotals is the foundation acceptance test: 10,000 readings at
// QoS 1 from 100 devices through a real mosquitto into the real binary; the
// per-device totals over all processing-time windows equal the ones computed
// here (window boundaries depend on timing, totals do not).
func TestE2E_MQTTTotals(t *testing.T) {
	const devices, perDevice = 100, 100
	b := mosquitto.Start(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg := `
agent {
  device_id = "e2e"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker = "` + b.URL() + `"
  topics = ["sensors/+/telemetry"]
  qos    = 1
}
sink "file" "out" { path = "` + out + `" }
sink "file" "dead" { path = "%DIR%/dead.jsonl" }
pipeline "totals" {
  from   = source.mqtt.sensors
  key    = event.device
  parallelism = 2
  window "tumbling" {
    time = "processing"
    size = "500ms"
  }
  aggregate {
    n   = count()
    sum = sum(event.v)
    min = min(event.v)
    max = max(event.v)
  }
  to          = [sink.file.out]
  dead_letter = sink.file.dead
}
`
	ag := startAgent(t, dir, cfg)

	// Wait for the agent's subscription so QoS 1 messages are not dropped
	// for want of a subscriber (the session is persistent from then on).
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })

	want := map[string]*totals{}
	rng := rand.New(rand.NewPCG(1, 2))
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("e2e-pub").SetMaxResumePubInFlight(1000))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	var toks []paho.Token
	for i := 0; i < perDevice; i++ {
		for d := 0; d < devices; d++ {
			dev := "dev-" + strconv.Itoa(d)
			v := math.Round(rng.Float64()*2000-1000) / 10
			tt := want[dev]
			if tt == nil {
				tt = &totals{min: math.Inf(1), max: math.Inf(-1)}
				want[dev] = tt
			}
			tt.count++
			tt.sum += v
			tt.min = math.Min(tt.min, v)
			tt.max = math.Max(tt.max, v)
			payload := fmt.Sprintf(`{"device":%q,"v":%v,"seq":%d}`, dev, v, i)
			toks = append(toks, pub.Publish("sensors/"+dev+"/telemetry", 1, false, payload))
		}
	}
	// A malformed message must be dead-lettered, not stop the pipeline.
	toks = append(toks, pub.Publish("sensors/bad/telemetry", 1, false, `{"device":`))
	for _, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}

	await.True(t, 60*time.Second, `len(st) == 1 && st[0].ReadingsIn == devices*perDevice+1`, func() bool {
		st := ag.status(t)
		return len(st) == 1 && st[0].ReadingsIn == devices*perDevice+1
	})
	// Windows are 500ms of processing time: wait until every one has fired.
	await.True(t, 60*time.Second, `sumOf(out, "n") >= devices*perDevice`, func() bool { return sumOf(out, "n") >= devices*perDevice })
	ag.stop(syscall.SIGTERM, 20*time.Second)

	got := map[string]*totals{}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Key              string
			Kind             string
			N, Sum, Min, Max float64
			WindowStartMs    int64 `json:"window_start_ms"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad output line %q: %v", sc.Text(), err)
		}
		tt := got[r.Key]
		if tt == nil {
			tt = &totals{min: math.Inf(1), max: math.Inf(-1)}
			got[r.Key] = tt
		}
		tt.count += r.N
		tt.sum += r.Sum
		tt.min = math.Min(tt.min, r.Min)
		tt.max = math.Max(tt.max, r.Max)
	}
	if len(got) != devices {
		t.Fatalf("results for %d devices, want %d", len(got), devices)
	}
	for dev, w := range want {
		g := got[dev]
		if g == nil || g.count != w.count || math.Abs(g.sum-w.sum) > 1e-6 || g.min != w.min || g.max != w.max {
			t.Errorf("%s: got %+v, want %+v", dev, g, w)
		}
	}
	dead, _ := os.ReadFile(filepath.Join(dir, "dead.jsonl"))
	if n := countLines(dead); n != 1 {
		t.Errorf("dead letters: %d lines, want 1:\n%s", n, dead)
	}
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}

// TestCLI_Validate runs `eddy validate` on a file with several mistakes: it
// exits 1 and reports each as file:line:col with a hint.
func TestCLI_Validate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.hcl")
	src := `agent {
  device_id = "d1"
  admni = "x"
}
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["a/#/b"]
  qos = 3
}
sink "stdout" "out" {}
pipeline "p" {
  from = source.mqtt.sensor
  key = event.device
  aggregate { n = cnt() }
  to = [sink.stdout.out]
}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(eddyBin, "validate", "-c", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("validate: err %v, want exit 1; output:\n%s", err, out)
	}
	for _, want := range []string{
		path + `:3:3: error: Unsupported argument; An argument named "admni" is not expected here. Did you mean "admin"?`,
		path + `:7:13: error: Invalid topic filter`,
		path + `:8:9: error: Value out of range`,
		path + `:12:10: error: Reference to undeclared source`,
		path + `:14:19: error: Unknown aggregate function`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	good := filepath.Join("examples", "quickstart.hcl")
	if out, err := exec.Command(eddyBin, "validate", "-c", good).CombinedOutput(); err != nil {
		t.Fatalf("validate %s: %v\n%s", good, err, out)
	}
}

func TestCLI_VersionAndHelp(t *testing.T) {
	out, err := exec.Command(eddyBin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "eddy ") || !strings.Contains(string(out), "linux/") {
		t.Fatalf("version: %v %q", err, out)
	}
	if out, err := exec.Command(eddyBin, "help").Output(); err != nil || !strings.Contains(string(out), "eddy run -c FILE") {
		t.Fatalf("help: %v %q", err, out)
	}
	if err := exec.Command(eddyBin, "frobnicate").Run(); err == nil {
		t.Fatal("unknown command exited 0")
	}
}

// TestE2E_IdleTopicReleasesWatermark: a source with two topic filters keeps
// one watermark per filter and fires on their minimum; when one filter's
// sensors fall silent for idle_timeout, windows keep firing on the other
// (Flink's idleness: an idle input is left out until it speaks again).
func TestE2E_IdleTopicReleasesWatermark(t *testing.T) {
	b := mosquitto.Start(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg := `
agent {
  device_id = "e2e"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker = "` + b.URL() + `"
  topics = ["a/#", "b/#"]
  qos    = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark {
    max_out_of_orderness = "0s"
    idle_timeout         = "1s"
  }
}
sink "file" "out" { path = "` + out + `" }
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to = [sink.file.out]
}
`
	ag := startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("e2e-idle-pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	send := func(topic, dev string, ts int64) {
		t.Helper()
		tok := pub.Publish(topic, 1, false, fmt.Sprintf(`{"device":%q,"ts":%d}`, dev, ts))
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	send("b/1", "b", 1500) // b speaks once, then falls silent
	for ts := int64(1000); ts <= 5000; ts += 500 {
		send("a/1", "a", ts)
	}
	// While b is not yet idle, the combined watermark is held at b's 1499:
	// no window of a beyond [1000,2000) can fire.
	fired := func() map[int64]bool {
		m := map[int64]bool{}
		for _, r := range readOutputsIfAny(out) {
			if r["key"] == "a" {
				m[int64(r["window_end_ms"].(float64))] = true
			}
		}
		return m
	}
	// Once b has been idle for 1s, a alone drives the watermark to 4999,
	// so [4000,5000) fires, with no new reading needed.
	// a keeps speaking (an input that is silent too would be idle as well,
	// and with every input idle the watermark stays put).
	if fired()[5000] {
		t.Fatal("[4000,5000) fired while b still held the watermark")
	}
	await.True(t, 15*time.Second, `fired()[5000]`, func() bool {
		send("a/1", "a", 5000)
		return fired()[5000]
	})
	ag.stop(syscall.SIGTERM, 20*time.Second)
}

// sumOf sums the numeric field of every complete JSON line in path.
func sumOf(path, field string) float64 {
	var sum float64
	for _, r := range readOutputsIfAny(path) {
		v, _ := r[field].(float64)
		sum += v
	}
	return sum
}

func readOutputsIfAny(path string) []map[string]any {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []map[string]any
	for _, line := range strings.Split(string(data), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
