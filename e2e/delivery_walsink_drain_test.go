package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// drainConfig reads a file to its end and publishes every window upstream
// through an exactly-once MQTT sink.
const drainConfig = `
agent {
  device_id   = "drain"
  data_dir    = "%DATA%"
  admin       = ""
  parallelism = 2
  log_level   = "info"
}
source "file" "in" {
  path = "%DIR%/in.jsonl"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "0s" }
}
sink "mqtt" "cloud" {
  broker   = "%UPSTREAM%"
  topic    = "results/${device_id}/${pipeline}/${key}"
  delivery = "exactly_once"%SINK%
}
pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
  }
  to = [sink.mqtt.cloud]
}
checkpoint { interval = "200ms" }
`

// writeWindowReadings writes devices × windows tumbling 10 s windows of
// readings, one a second, and returns the expected result of each window
// as the collector keys it (key/start-end → n and sum).
func writeWindowReadings(t *testing.T, path string, devices, windows int) map[string]string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	const base = int64(1_700_000_000_000)
	want := map[string]string{}
	for i := range windows * 10 {
		for d := range devices {
			fmt.Fprintf(w, `{"device":"dev-%d","ts":%d,"v":%d}`+"\n", d, base+int64(i)*1000, d+i)
		}
	}
	for d := range devices {
		for k := range windows {
			start := base + int64(k)*10000
			sum := 0
			for i := k * 10; i < k*10+10; i++ {
				sum += d + i
			}
			want[fmt.Sprintf("dev-%d/%v-%v", d, float64(start), float64(start+10000))] = fmt.Sprintf("n=10 sum=%d", sum)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestWALSink_DrainsAtEndOfInput: a run whose file input ends waits after
// its final checkpoint until the exactly-once MQTT sink's WAL is delivered,
// so when "eddy run" exits 0 every result is at the broker (here one with
// mosquitto's default configuration: 20 in flight, ~10,000 results take
// seconds to drain). Nothing publishes after the exit, so the collector
// has them all from this run or never.
func TestWALSink_DrainsAtEndOfInput(t *testing.T) {
	t.Parallel()
	up := mosquitto.Start(t, mosquitto.DefaultInflight())
	col := newCollector(t, up.URL(), "results/#")
	dir := t.TempDir()
	want := writeWindowReadings(t, filepath.Join(dir, "in.jsonl"), 1000, 10)
	out, err := runEddy(t, "run", "-c", writeConfig(t, dir, drainConfig, "%UPSTREAM%", up.URL(), "%SINK%", ""))
	if err != nil {
		t.Fatalf("eddy run: %v", err)
	}
	if strings.Contains(out, "not delivered upstream") {
		t.Errorf("the run reported undelivered results")
	}
	await.True(t, 30*time.Second, `col.windowCount("drain") >= len(want)`, func() bool { return col.windowCount("drain") >= len(want) })
	if diff := differingWindows(t, want, col.windows("drain")); diff > 0 {
		t.Errorf("%d of %d windows differ", diff, len(want))
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.duplicates) > 0 || len(col.outOfOrder) > 0 {
		t.Errorf("%d duplicates, %d out of order", len(col.duplicates), len(col.outOfOrder))
	}
}

// TestWALSink_EndOfInputWithUplinkDown: with the upstream broker down, a
// run whose input ends waits drain_timeout, then exits with status 3
// saying how many results are undelivered and that the next start delivers
// them; the next start (the broker back) does, and exits 0.
func TestWALSink_EndOfInputWithUplinkDown(t *testing.T) {
	t.Parallel()
	up := mosquitto.Start(t)
	col := newCollector(t, up.URL(), "results/#")
	up.Stop()
	dir := t.TempDir()
	want := writeWindowReadings(t, filepath.Join(dir, "in.jsonl"), 50, 4)
	cfg := writeConfig(t, dir, drainConfig, "%UPSTREAM%", up.URL(), "%SINK%", "\n  drain_timeout = \"1s\"")
	start := time.Now()
	out, err := runEddy(t, "run", "-c", cfg)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("eddy run with results undelivered: %v; want exit status 3", err)
	}
	line := fmt.Sprintf(`undelivered=%d`, len(want))
	if !strings.Contains(out, "the next start delivers them") || !strings.Contains(out, line) {
		t.Errorf("output lacks the undelivered count (%s) and what happens to them:\n%s", line, out)
	}
	t.Logf("run with the uplink down exited after %v", time.Since(start))
	up.Restart()
	p := startEddy(t, "run", "-c", cfg)
	await.True(t, 60*time.Second, `col.windowCount("drain") >= len(want)`, func() bool { return col.windowCount("drain") >= len(want) })
	if !p.wait(60 * time.Second) {
		t.Fatal("the second run did not exit")
	}
	if p.err != nil {
		t.Errorf("the second run, everything delivered: %v; want exit status 0", p.err)
	}
	if diff := differingWindows(t, want, col.windows("drain")); diff > 0 {
		t.Errorf("%d of %d windows differ", diff, len(want))
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.duplicates) > 0 {
		t.Errorf("%d duplicates", len(col.duplicates))
	}
}
