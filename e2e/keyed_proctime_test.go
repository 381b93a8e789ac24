package e2e

// Per-key blocks on processing time through the real binary and a real
// broker: absence finds a device that went silent on the agent's clock
// (no other reading has to move time on), and report_by_exception's
// processing-time heartbeat repeats a quiet key's last value.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// procTimeConfig reads readings without timestamps from MQTT into a
// pipeline whose per-key block (%BLOCK%) runs on processing time, writing
// to an exactly-once file sink checkpointed every 100 ms.
const procTimeConfig = `
agent {
  device_id = "pt"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker = "%BROKER%"
  topics = ["sensors/+"]
  qos    = 1
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "watch" {
  from = source.mqtt.sensors
  key  = event.device
  %BLOCK%
  map { v = event.v }
  to = [sink.file.out]
}
checkpoint { interval = "100ms" }
`

// signalRecord is the part of a block's record the tests read.
type signalRecord struct {
	ID       string   `json:"id"`
	Key      string   `json:"key"`
	Kind     string   `json:"kind"`
	TimeMs   int64    `json:"time_ms"`
	StartMs  int64    `json:"start_ms"`
	Duration int64    `json:"duration_ms"`
	Value    *float64 `json:"value"`
	V        *float64 `json:"v"`
}

// committedSignals reads the committed records of dir's exactly-once sink
// (failing on a duplicated id).
func committedSignals(t *testing.T, dir string) []signalRecord {
	t.Helper()
	var out []signalRecord
	for _, l := range committedRecords(t, filepath.Join(dir, "out")) {
		var r signalRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// countKind counts the records of key of kind.
func countKind(recs []signalRecord, key, kind string) int {
	n := 0
	for _, r := range recs {
		if r.Key == key && r.Kind == kind {
			n++
		}
	}
	return n
}

// idFrom is the "o<offset>/<n>" tail of a processing-time signal's id.
func idFrom(id string) string {
	i := strings.LastIndex(id, "/o")
	if i < 0 {
		return ""
	}
	return id[i+1:]
}

// publisher connects a QoS 1 MQTT publisher to b.
func publisher(t *testing.T, b *mosquitto.Broker, id string) func(device string, v int) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return func(device string, v int) {
		t.Helper()
		tok := c.Publish("sensors/"+device, 1, false, fmt.Sprintf(`{"device":%q,"v":%d}`, device, v))
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
}

// TestKeyed_AbsenceProcessingTimeThroughBroker: absence { timeout = "1s" }
// on processing time (the default) over readings without timestamps. Two
// devices send once and go quiet: each is reported silent once, with no
// other reading moving time on; one speaks again and is resumed, with the
// whole gap, by a record whose id names the same reading as its silence's;
// it is then silent again, once. A third device's reading is checkpointed
// with its timer, the agent is SIGKILLed before the timer fires and
// restarted: the restored timer reports it silent, once.
func TestKeyed_AbsenceProcessingTimeThroughBroker(t *testing.T) {
	b := mosquitto.Start(t)
	dir := t.TempDir()
	cfg := replaceAll(procTimeConfig, "%BROKER%", b.URL(), "%BLOCK%", `absence { timeout = "1s" }`)
	ag := startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	pub := publisher(t, b, "absence-pub")

	pub("a", 1)
	pub("b", 1)
	await.True(t, 30*time.Second, `countKind(recs, "a", "silent") == 1 && countKind(recs, "b", "silent") == 1`, func() bool {
		recs := committedSignals(t, dir)
		return countKind(recs, "a", "silent") == 1 && countKind(recs, "b", "silent") == 1
	})
	pub("a", 2)
	await.True(t, 30*time.Second, `countKind(committedSignals(t, dir), "a", "silent") == 2`, func() bool { return countKind(committedSignals(t, dir), "a", "silent") == 2 })

	// c's timer is in a checkpoint; the process dies before it fires.
	ag.waitCheckpointAfter(t, 30*time.Second, func() { pub("c", 1) })
	ag.kill()
	if countKind(committedSignals(t, dir), "c", "silent") != 0 {
		// A loaded machine took over the timeout to checkpoint: the
		// silence was committed before the kill, and must not come again.
		t.Log("c went silent before the kill")
	}
	ag = startAgent(t, dir, cfg)
	await.True(t, 30*time.Second, `countKind(committedSignals(t, dir), "c", "silent") == 1`, func() bool { return countKind(committedSignals(t, dir), "c", "silent") == 1 })
	ag.stop(syscall.SIGTERM, 20*time.Second)

	recs := committedSignals(t, dir)
	var silentA []signalRecord
	var resumedA *signalRecord
	for i, r := range recs {
		switch {
		case r.Key == "a" && r.Kind == "silent":
			silentA = append(silentA, r)
		case r.Key == "a" && r.Kind == "resumed":
			resumedA = &recs[i]
		}
		if r.Kind == "silent" && (r.TimeMs-r.StartMs != 1000 || r.V != nil) {
			t.Errorf("silent record %+v: want time = start + 1 s and a null map field", r)
		}
	}
	if countKind(recs, "b", "silent") != 1 || countKind(recs, "b", "resumed") != 0 || countKind(recs, "c", "silent") != 1 || len(silentA) != 2 || resumedA == nil {
		t.Fatalf("records %+v: want a silent, resumed, silent; b and c silent once", recs)
	}
	if idFrom(resumedA.ID) != idFrom(silentA[0].ID) || idFrom(silentA[1].ID) == idFrom(silentA[0].ID) || !strings.HasPrefix(resumedA.ID, "pt/watch/a/absence/resumed/o") {
		t.Errorf("ids %s, %s, %s: the resumed record names the reading its silence does, the next silence another", silentA[0].ID, resumedA.ID, silentA[1].ID)
	}
	if resumedA.Duration < 1000 || resumedA.V == nil || *resumedA.V != 2 {
		t.Errorf("resumed %+v: want the gap (≥ 1 s) and the resuming reading's v = 2", *resumedA)
	}
}

// TestKeyed_ReportHeartbeatProcessingTimeThroughBroker:
// report_by_exception with heartbeat = "1s" on processing time: a device
// that sends one reading and goes quiet gets its value repeated by
// heartbeat records about once a second, numbered from the report; a new
// value is reported and the heartbeats repeat it from then on.
func TestKeyed_ReportHeartbeatProcessingTimeThroughBroker(t *testing.T) {
	b := mosquitto.Start(t)
	dir := t.TempDir()
	cfg := replaceAll(procTimeConfig, "%BROKER%", b.URL(), "%BLOCK%", `report_by_exception {
    value     = event.v
    deadband  = 5
    heartbeat = "1s"
    time      = "processing"
  }`)
	ag := startAgent(t, dir, cfg)
	await.True(t, 10*time.Second, `ag.connected(t, "sensors")`, func() bool { return ag.connected(t, "sensors") })
	pub := publisher(t, b, "report-pub")

	pub("a", 10)
	await.True(t, 30*time.Second, `countKind(committedSignals(t, dir), "a", "heartbeat") >= 2`, func() bool { return countKind(committedSignals(t, dir), "a", "heartbeat") >= 2 })
	pub("a", 30)
	await.True(t, 30*time.Second, `countKind(recs, "a", "report") == 2 && last.Kind == "heartbeat" && last.Value != nil && *last.Value == 30`, func() bool {
		recs := committedSignals(t, dir)
		last := recs[len(recs)-1]
		return countKind(recs, "a", "report") == 2 && last.Kind == "heartbeat" && last.Value != nil && *last.Value == 30
	})
	ag.stop(syscall.SIGTERM, 20*time.Second)

	recs := committedSignals(t, dir)
	var report string
	beat := 0
	for _, r := range recs {
		switch r.Kind {
		case "report":
			report, beat = idFrom(r.ID), 0
		case "heartbeat":
			beat++
			from, _, _ := strings.Cut(idFrom(r.ID), "/")
			rfrom, _, _ := strings.Cut(report, "/")
			if from != rfrom || !strings.HasSuffix(r.ID, fmt.Sprintf("/%d", beat)) || r.Value == nil || r.V != nil {
				t.Errorf("heartbeat %+v after report %s: want the report's reading, number %d, its value and null map fields", r, report, beat)
			}
		}
	}
	if recs[0].Kind != "report" || recs[0].Value == nil || *recs[0].Value != 10 {
		t.Errorf("first record %+v: want the report of 10", recs[0])
	}
}
