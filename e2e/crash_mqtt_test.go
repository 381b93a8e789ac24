package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/scripts/mqttjs"
)

// crashScale is the size of the MQTT crash test: the short version runs in
// CI; EDDY_CRASH_LONG=1 (scripts/crash-long.sh) runs the long one.
func crashScale() (readings, devices, kills int) {
	if os.Getenv("EDDY_CRASH_LONG") != "" {
		return 200_000, 1000, 10
	}
	return 20_000, 1000, 3
}

const mqttCrashConfig = `
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
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "5s" }
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "sums" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
  }
  to = [sink.file.out]
}
checkpoint { interval = "200ms" }
`

// lastFirings reads committed output and keeps, per (key, window), the
// fields of the last firing (the last firing is the result).
func lastFirings(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	best := map[string]int{}
	for _, line := range committedRecords(t, dir) {
		var r struct {
			Key                        string
			WindowStartMs, WindowEndMs int64
			Firing                     int
			N, Sum                     float64
		}
		var raw map[string]any
		json.Unmarshal([]byte(line), &raw)
		r.Key, _ = raw["key"].(string)
		r.Firing = int(raw["firing"].(float64))
		k := fmt.Sprintf("%s/%v-%v", r.Key, raw["window_start_ms"], raw["window_end_ms"])
		if f, ok := best[k]; !ok || r.Firing > f {
			best[k] = r.Firing
			out[k] = fmt.Sprintf("n=%v sum=%v", raw["n"], raw["sum"])
		}
	}
	return out
}

// mqttCrashRun is one agent's data directory and configuration, run again
// and again (start, kill, stop) by the crash tests; its admin endpoint
// keeps one address across the runs.
type mqttCrashRun struct {
	t      *testing.T
	dir    string
	cfg    string // the configuration's path
	admin  string
	p      *eddyProc // the current run
	starts int
	ready  func() bool // nil: the MQTT source is connected
	// bin is the eddy binary start runs; "" for this build's (eddyBin).
	bin string
}

// newCrashRun writes tmpl into a new directory (writeConfig, with %ADMIN%
// a free loopback address and kv before it).
func newCrashRun(t *testing.T, tmpl string, kv ...string) *mqttCrashRun {
	r := &mqttCrashRun{t: t, dir: t.TempDir(), admin: loopback.Addr(t)}
	r.cfg = writeConfig(t, r.dir, tmpl, append(kv[:len(kv):len(kv)], "%ADMIN%", r.admin)...)
	return r
}

func newMQTTCrashRun(t *testing.T, broker, client string) *mqttCrashRun {
	return newCrashRun(t, mqttCrashConfig, "%BROKER%", broker, "%CLIENT%", client)
}

// start starts a run and waits up to 15 s until it is ready.
func (r *mqttCrashRun) start() {
	r.t.Helper()
	bin := r.bin
	if bin == "" {
		bin = eddyBin
	}
	r.p = startBinary(r.t, bin, "run", "-c", r.cfg)
	r.p.admin = r.admin
	r.starts++
	ready := r.ready
	if ready == nil {
		ready = func() bool { return sourceConnected(r.admin, "sensors") }
	}
	await.True(r.t, 15*time.Second, `the condition`, ready)
}

func (r *mqttCrashRun) kill() { r.p.kill() }

func (r *mqttCrashRun) stop() {
	r.t.Helper()
	r.p.stop(os.Interrupt, 60*time.Second)
}

// waitResults waits until the committed output holds want windows.
func (r *mqttCrashRun) waitResults(want int) map[string]string {
	r.t.Helper()
	var got map[string]string
	await.Until(r.t, 120*time.Second, func() error {
		if got = lastFirings(r.t, filepath.Join(r.dir, "out")); len(got) < want {
			return fmt.Errorf("only %d of %d windows committed", len(got), want)
		}
		return nil
	})
	return got
}

// finalResults waits until the committed output holds n windows, stops the
// agent, and returns the last firings read after the stop, without a window
// keyed "".
func (r *mqttCrashRun) finalResults(n int) map[string]string {
	r.t.Helper()
	r.waitResults(n)
	r.stop()
	got := lastFirings(r.t, filepath.Join(r.dir, "out"))
	delete(got, "")
	return got
}

// killsAt returns the between callback of a publisher of readings in
// batches of 1000 that kills and restarts the run after kills batches
// drawn at random, each at a random moment.
func (r *mqttCrashRun) killsAt(readings, kills int) func(i int) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	killAt := map[int]bool{}
	for len(killAt) < kills {
		killAt[(1+rng.IntN(readings/1000-1))*1000] = true
	}
	return func(i int) {
		if killAt[i] {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // pacing: a random kill moment
			r.kill()
			r.start()
		}
	}
}

// sameAfterKills waits for the run's windows, stops it and fails the test
// unless it started kills+1 times and committed exactly want.
func (r *mqttCrashRun) sameAfterKills(want map[string]string, kills int) {
	r.t.Helper()
	got := r.finalResults(len(want))
	if r.starts != kills+1 {
		r.t.Fatalf("%d starts, want %d", r.starts, kills+1)
	}
	sameWindows(r.t, want, got, kills)
}

// sameWindows fails the test unless got holds exactly want's windows with
// the same results: it reports up to 10 differing windows and every extra
// one.
func sameWindows(t *testing.T, want, got map[string]string, kills int) {
	t.Helper()
	diff := differingWindows(t, want, got)
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: extra window %q", k, got[k])
		}
	}
	if diff > 0 {
		t.Fatalf("%d of %d windows differ after %d kills", diff, len(want), kills)
	}
}

// differingWindows reports (as test errors) up to 10 of want's windows whose
// result in got differs or is missing, and returns how many there are.
func differingWindows(t *testing.T, want, got map[string]string) int {
	t.Helper()
	diff := 0
	for k, w := range want {
		if got[k] != w {
			if diff < 10 {
				t.Errorf("%s: got %q, want %q", k, got[k], w)
			}
			diff++
		}
	}
	return diff
}

// publishReadings publishes the test's readings at QoS 1, out of order
// within the watermark bound, then a flush reading far ahead so every
// window fires. between is called after each batch.
func publishReadings(t *testing.T, url, client string, readings, devices int, between func(i int)) {
	t.Helper()
	if err := sendReadings(url, client, readings, devices, between); err != nil {
		t.Fatal(err)
	}
}

// sendReadings is publishReadings without a *testing.T, for goroutines.
func sendReadings(url, client string, readings, devices int, between func(i int)) error {
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(client).SetMaxResumePubInFlight(1000))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	return generateReadings(readings, devices, between, func(batch []reading) error {
		var toks []paho.Token
		for _, r := range batch {
			toks = append(toks, pub.Publish(r.topic, 1, false, r.payload))
		}
		for _, tok := range toks {
			if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				return fmt.Errorf("publish: %v", tok.Error())
			}
		}
		return nil
	})
}

// reading is one generated reading: its device, topic and payload.
type reading struct {
	device         int
	topic, payload string
}

// generateReadings generates the test's readings, out of order within the
// watermark bound, in batches of 1,000 given to publish (between is called
// after each), then the flush reading far ahead, alone.
func generateReadings(readings, devices int, between func(i int), publish func([]reading) error) error {
	rng := rand.New(rand.NewPCG(11, 12))
	base := int64(1_700_000_000_000)
	const batch = 1000
	for i := 0; i < readings; i += batch {
		var b []reading
		for j := i; j < i+batch && j < readings; j++ {
			d := j % devices
			ts := base + int64(j)*5 + rng.Int64N(3000)
			payload := `{"device":"dev-` + strconv.Itoa(d) + `","ts":` + strconv.FormatInt(ts, 10) + `,"v":` + strconv.Itoa(rng.IntN(100)) + `}`
			b = append(b, reading{d, "sensors/" + strconv.Itoa(d) + "/telemetry", payload})
		}
		if err := publish(b); err != nil {
			return err
		}
		between(i)
	}
	flush := fmt.Sprintf(`{"device":"flush","ts":%d,"v":0}`, base+int64(readings)*5+3_600_000)
	if err := publish([]reading{{-1, "sensors/flush/telemetry", flush}}); err != nil {
		return fmt.Errorf("publish flush: %w", err)
	}
	return nil
}

// publishReadingsMQTTJS is publishReadings through MQTT.js at MQTT 5, each
// reading with the user property "site" (site-0 to site-2, by device; the
// flush reading's is "flush").
func publishReadingsMQTTJS(t *testing.T, url, client string, readings, devices int, between func(i int)) {
	t.Helper()
	pub, err := mqttjs.Connect(url, client)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	err = generateReadings(readings, devices, between, func(batch []reading) error {
		msgs := make([]mqttjs.Message, len(batch))
		for i, r := range batch {
			site := "flush"
			if r.device >= 0 {
				site = "site-" + strconv.Itoa(r.device%3)
			}
			msgs[i] = mqttjs.Message{Topic: r.topic, Payload: r.payload, QoS: 1, UserProperties: map[string]string{"site": site}}
		}
		return pub.Publish(msgs)
	})
	if err == nil {
		err = pub.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrash_MQTTExactlyOnce is the checkpoint acceptance test: readings at
// QoS 1 from many devices through a real mosquitto, the agent SIGKILLed at
// random moments and restarted; the exactly-once file sink's committed
// output, last firing per (key, window), equals an uninterrupted run's, with
// no duplicated record. Event-time watermarks only, so timing cannot change
// the expected result.
func TestCrash_MQTTExactlyOnce(t *testing.T) {
	t.Parallel()
	// MQTT 5 (the default) with MQTT.js publishing, the key read from a user
	// property, so what replay recomputes needs the properties in the
	// ingest log; and MQTT 3.1.1 through paho as before.
	v5 := replaceAll(mqttCrashConfig, "key  = event.device", `key  = "${event.device}@${meta.user_properties.site}"`)
	v4 := replaceAll(mqttCrashConfig, "qos       = 1\n", "qos       = 1\n  protocol_version = 4\n")
	for _, tt := range []struct {
		name    string
		cfg     string
		publish func(t *testing.T, url, client string, readings, devices int, between func(i int))
	}{
		{"mqtt5", v5, publishReadingsMQTTJS},
		{"mqtt311", v4, publishReadings},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testCrashMQTT(t, tt.cfg, tt.publish)
		})
	}
}

func testCrashMQTT(t *testing.T, cfg string, publish func(t *testing.T, url, client string, readings, devices int, between func(i int))) {
	readings, devices, kills := crashScale()
	b := mosquitto.Start(t)

	clean := newCrashRun(t, cfg, "%BROKER%", b.URL(), "%CLIENT%", "eddy-clean")
	clean.start()
	publish(t, b.URL(), "pub-clean", readings, devices, func(int) {})
	want := clean.finalResults(len(expectedWindows(readings, devices)))
	if len(want) < devices {
		t.Fatalf("uninterrupted run produced %d windows", len(want))
	}

	crashed := newCrashRun(t, cfg, "%BROKER%", b.URL(), "%CLIENT%", "eddy-crashed")
	crashed.start()
	publish(t, b.URL(), "pub-crashed", readings, devices, crashed.killsAt(readings, kills))
	crashed.sameAfterKills(want, kills)
	t.Logf("%d readings, %d kills: %d windows identical to the uninterrupted run, no duplicate records", readings, kills, len(want))
}
