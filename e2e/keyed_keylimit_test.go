package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// keyLimitConfig: readings of the embedded broker in 1 s event-time
// windows per device, with max_keys = 5.
const keyLimitConfig = `
agent {
  device_id = "keys"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/#"]
  qos    = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "0s" }
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
sink "file" "dead" { path = "%DIR%/dead.jsonl" }
pipeline "p" {
  from        = source.mqtt.sensors
  key         = event.device
  parallelism = 2
  max_keys    = 5
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to          = [sink.file.out]
  dead_letter = sink.file.dead
}
`

// TestMaxKeys_FloodOfNewKeys: a sensor floods new device ids into a
// pipeline with max_keys = 5 (two subtasks) while three devices report as
// usual. Per window the three and the first two new ids are taken, every
// other new id is dead-lettered with reason key_limit, and the three keep
// getting their results. The limit survives a restart: the restored state
// holds 5 keys, so new ids are still refused until the window is purged.
func TestMaxKeys_FloodOfNewKeys(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	var pub paho.Client
	connect := func() {
		pub = paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("flood"))
		if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect: %v", tok.Error())
		}
	}
	send := func(dev string, ts int64) {
		t.Helper()
		tok := pub.Publish("sensors/"+dev, 1, false, fmt.Sprintf(`{"device":%q,"ts":%d}`, dev, ts))
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", dev, tok.Error())
		}
	}
	flood := func(from, to int, ts int64) {
		for i := from; i < to; i++ {
			send(fmt.Sprintf("f%d", i), ts)
		}
	}
	good := func(ts int64) {
		for _, d := range []string{"g1", "g2", "g3"} {
			send(d, ts)
		}
	}
	deadLettered := func(ag *eddyProc) uint64 {
		var n uint64
		for _, p := range ag.status(t) {
			n += p.DeadLettered
		}
		return n
	}

	ag := startAgent(t, dir, keyLimitConfig, "%BROKER%", brokerAddr)
	connect()
	good(100)
	flood(0, 100, 200) // f0, f1 taken; 98 refused
	await.True(t, 30*time.Second, `deadLettered(ag) == 98`, func() bool { return deadLettered(ag) == 98 })
	pub.Disconnect(100)
	ag.stop(syscall.SIGTERM, 60*time.Second)
	if n := fileLines(filepath.Join(dir, "out.jsonl")); n != 0 {
		t.Fatalf("%d results before any window closed", n)
	}

	ag = startAgent(t, dir, keyLimitConfig, "%BROKER%", brokerAddr)
	await.True(t, 10*time.Second, "metricValue(t, ag.admin, `eddy_window_keys{pipeline=\"p\"}`) == 5", func() bool {
		return metricValue(t, ag.admin, `eddy_window_keys{pipeline="p"}`) == 5
	})
	connect()
	defer pub.Disconnect(100)
	flood(100, 150, 300) // the restored 5 keys fill the limit: all 50 refused
	await.True(t, 30*time.Second, `deadLettered(ag) == 50`, func() bool { return deadLettered(ag) == 50 })
	send("g1", 400) // a live key: taken
	good(1100)      // closes window 0: its 5 keys are purged, g1..g3 open window 1
	flood(200, 300, 1200)
	good(2100) // closes window 1
	await.True(t, 30*time.Second, `deadLettered(ag) == 50+98 && fileLines(filepath.Join(dir, "out.jsonl")) == 10`, func() bool { return deadLettered(ag) == 50+98 && fileLines(filepath.Join(dir, "out.jsonl")) == 10 })
	if n := metricValue(t, ag.admin, `eddy_window_keys{pipeline="p"}`); n != 3 {
		t.Errorf("eddy_window_keys = %v, want 3 (g1..g3 in window 2)", n)
	}
	if n := metricValue(t, ag.admin, `eddy_readings_dead_lettered_total{pipeline="p",reason="key_limit"}`); n != 148 {
		t.Errorf("key_limit dead letters counted %v, want 148 since the restart", n)
	}

	var got []string
	for _, line := range readOutputs(t, filepath.Join(dir, "out.jsonl")) {
		got = append(got, fmt.Sprintf("%v@%v=%v", line["key"], line["window_start"], line["n"]))
	}
	slices.Sort(got)
	const w0, w1 = "1970-01-01T00:00:00.000Z", "1970-01-01T00:00:01.000Z"
	want := []string{"f0@" + w0 + "=1", "f1@" + w0 + "=1", "f200@" + w1 + "=1", "f201@" + w1 + "=1",
		"g1@" + w0 + "=2", "g1@" + w1 + "=1", "g2@" + w0 + "=1", "g2@" + w1 + "=1", "g3@" + w0 + "=1", "g3@" + w1 + "=1"}
	if !slices.Equal(got, want) {
		t.Errorf("results %v, want %v", got, want)
	}
	dead := readOutputs(t, filepath.Join(dir, "dead.jsonl"))
	if len(dead) != 98+50+98 {
		t.Errorf("%d dead letters, want %d", len(dead), 98+50+98)
	}
	for _, d := range dead {
		if d["reason"] != "key_limit" {
			t.Errorf("dead letter %v: reason %v, want key_limit", d, d["reason"])
			break
		}
	}
}
