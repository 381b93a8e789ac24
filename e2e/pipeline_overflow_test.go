package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

const overflowConfig = `
agent {
  device_id = "overflow"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
    avg = avg(event.v)
    max = max(event.v)
  }
  to = [sink.file.out]
}
`

// TestPipeline_OverflowingSumIsReported: two readings of 1.797e308 in one
// window make a sum beyond float64. The result is written with sum and avg
// null (max stays a number), and the overflow is not silent: each null is
// counted in eddy_result_values_null_total with reason "overflow" and a
// warning names the aggregates and the key.
func TestPipeline_OverflowingSumIsReported(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	p := startAgent(t, dir, overflowConfig, "%BROKER%", brokerAddr)

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("sensor-big"))
	await.True(t, 15*time.Second, `tok.WaitTimeout(2*time.Second) && tok.Error() == nil`, func() bool {
		tok := pub.Connect()
		return tok.WaitTimeout(2*time.Second) && tok.Error() == nil
	})
	// Two readings in one window of dev-big, then one a minute later (of
	// another device) that moves the watermark past that window's end.
	for _, payload := range []string{
		`{"device":"dev-big","ts":1700000001000,"v":1.797e308}`,
		`{"device":"dev-big","ts":1700000002000,"v":1.797e308}`,
		`{"device":"dev-other","ts":1700000060000,"v":1}`,
	} {
		tok := pub.Publish("sensors/dev/telemetry", 1, false, payload)
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	pub.Disconnect(100)

	var results []map[string]any
	await.True(t, 30*time.Second, `len(results) > 0`, func() bool {
		results = readResults(t, filepath.Join(dir, "out.jsonl"))
		return len(results) > 0
	})
	if r := results[0]; len(results) != 1 || r["key"] != "dev-big" || r["n"] != 2.0 || r["max"] != 1.797e308 || r["sum"] != nil || r["avg"] != nil {
		t.Fatalf("results %v: want one for dev-big with n 2, max 1.797e308, sum and avg null", results)
	}
	metric := `eddy_result_values_null_total{pipeline="p",reason="overflow"}`
	await.True(t, 10*time.Second, `metricValue(t, p.admin, metric) == 2`, func() bool { return metricValue(t, p.admin, metric) == 2 })
	if !p.waitLog("result overflowed float64 and is written as null", 10*time.Second) {
		t.Fatal("no log line about the overflow")
	}
	if !p.logContains("aggregates=sum,avg") || !p.logContains("key=dev-big") {
		t.Errorf("the overflow's log line does not name the aggregates and the key")
	}
}

// readResults returns the JSON lines of path (none if it does not exist
// yet).
func readResults(t *testing.T, path string) []map[string]any {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var rs []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs
}

// overflowDeltaConfig is overflowConfig's source with a per-key function
// instead of a window: each reading goes out with its delta.
var overflowDeltaConfig = overflowConfig[:strings.Index(overflowConfig, "pipeline")] + `pipeline "p" {
  from  = source.mqtt.sensors
  key   = event.device
  order = "arrival"
  map { d = delta(event.v) }
  to = [sink.file.out]
}
`

// TestPipeline_OverflowingDeltaIsReported: a per-key function's result
// beyond float64 — delta from -1.797e308 to 1.797e308 — is null in the
// reading's record, and counted and logged as a window aggregate's is:
// eddy_result_values_null_total with reason "overflow", and a warning
// naming the function and the key.
func TestPipeline_OverflowingDeltaIsReported(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	p := startAgent(t, dir, overflowDeltaConfig, "%BROKER%", brokerAddr)

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("sensor-big"))
	await.True(t, 15*time.Second, `tok.WaitTimeout(2*time.Second) && tok.Error() == nil`, func() bool {
		tok := pub.Connect()
		return tok.WaitTimeout(2*time.Second) && tok.Error() == nil
	})
	for _, payload := range []string{
		`{"device":"dev-big","ts":1700000001000,"v":-1.797e308}`,
		`{"device":"dev-big","ts":1700000002000,"v":1.797e308}`,
		`{"device":"dev-big","ts":1700000003000,"v":1.797e308}`,
	} {
		tok := pub.Publish("sensors/dev/telemetry", 1, false, payload)
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	pub.Disconnect(100)

	var results []map[string]any
	await.True(t, 30*time.Second, `len(results) == 3`, func() bool {
		results = readResults(t, filepath.Join(dir, "out.jsonl"))
		return len(results) >= 3
	})
	if len(results) != 3 || results[0]["d"] != nil || results[1]["d"] != nil || results[2]["d"] != 0.0 {
		t.Fatalf("results %v: want d null (the first reading), null (the overflow), 0", results)
	}
	metric := `eddy_result_values_null_total{pipeline="p",reason="overflow"}`
	await.True(t, 10*time.Second, `metricValue(t, p.admin, metric) == 1`, func() bool { return metricValue(t, p.admin, metric) == 1 })
	if !p.waitLog("result overflowed float64 and is written as null", 10*time.Second) {
		t.Fatal("no log line about the overflow")
	}
	if !p.logContains("aggregates=delta") || !p.logContains("key=dev-big") {
		t.Errorf("the overflow's log line does not name the function and the key")
	}
}
