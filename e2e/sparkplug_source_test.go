package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/io/sparkplug"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/scripts/sparkplugclient"
)

// sparkplugSourceConfig reads Sparkplug B edge nodes through a broker:
// "means" aggregates one metric per device, "metrics" every metric of
// dev1 through per-key state (count_key), which holds a key's readings by
// time and offset, so that the births' metrics of one timestamp must each
// count; "stale" passes on the stale readings of dead nodes and devices.
const sparkplugSourceConfig = `
agent {
  device_id = "host"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "scada" {
  broker    = "%BROKER%"
  client_id = "%CLIENT%"
  topics    = ["spBv1.0/plant1/#"]
  format    = "sparkplug_b"
  %SOURCE_EXTRA%
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
sink "file" "stale" {
  path = "%DIR%/stale"
}
sink "file" "dead" {
  path = "%DIR%/dead"
}
pipeline "means" {
  from   = source.mqtt.scada
  filter = !event.stale && event.metric == "temp" && !event.is_historical
  key    = "${event.node}/${event.device}"
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.value)
  }
  to          = [sink.file.out]
  dead_letter = sink.file.dead
}
pipeline "metrics" {
  from   = source.mqtt.scada
  order  = "event_time"
  filter = event.device == "dev1" && !event.stale && count_key() >= 1
  key    = "${event.node}/${event.device}/all"
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.value)
  }
  to = [sink.file.out]
}
pipeline "stale" {
  from   = source.mqtt.scada
  filter = event.stale
  to     = [sink.file.stale]
}
checkpoint { interval = "200ms" }
`

// spBase is the test's first timestamp, on a 10 s window boundary.
const spBase = 1_700_000_000_000

// spNode publishes one edge node's messages, as Sparkplug B encodes them,
// at QoS 1 so that none is lost on the way to the agent under test.
type spNode struct {
	t     *testing.T
	c     paho.Client
	group string
	node  string
	seq   uint64
	bdSeq uint64
	buf   []byte
}

func newSPNode(t *testing.T, url, node string) *spNode {
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("edge-" + node))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("edge node connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return &spNode{t: t, c: c, group: "plant1", node: node}
}

// publish sends one message of type typ (of device, "" for the node)
// with the given seq (its own when seq < 0).
func (n *spNode) publish(typ sparkplug.MessageType, device string, ts uint64, seq int, ms ...sparkplug.Metric) {
	n.t.Helper()
	p := sparkplug.Payload{Timestamp: ts, HasTimestamp: true, Metrics: ms}
	if typ != sparkplug.NDEATH {
		if seq < 0 {
			seq = int(n.seq)
		}
		p.Seq, p.HasSeq = uint64(seq), true
		n.seq = uint64(seq+1) % 256
	}
	topic := sparkplug.Topic{Group: n.group, Type: typ, Node: n.node, Device: device}.String()
	n.buf = sparkplug.AppendPayload(n.buf[:0], &p)
	if tok := n.c.Publish(topic, 1, false, append([]byte(nil), n.buf...)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		n.t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// births publishes NBIRTH (seq 0, a new bdSeq) and the DBIRTH of dev1
// with temp (alias 1) and count (alias 2).
func (n *spNode) births(ts uint64, temp float64) {
	n.seq = 0
	n.publish(sparkplug.NBIRTH, "", ts, -1,
		sparkplug.Metric{Name: []byte(sparkplug.BdSeqMetric), Datatype: sparkplug.TypeUInt64, Value: sparkplug.Long(n.bdSeq)},
		sparkplug.Metric{Name: []byte("Node Control/Rebirth"), Datatype: sparkplug.TypeBoolean, Value: sparkplug.Bool(false)})
	n.publish(sparkplug.DBIRTH, "dev1", ts, -1,
		sparkplug.Metric{Name: []byte("temp"), Alias: 1, HasAlias: true, Datatype: sparkplug.TypeDouble, Value: sparkplug.Double(temp)},
		sparkplug.Metric{Name: []byte("count"), Alias: 2, HasAlias: true, Datatype: sparkplug.TypeInt64, Value: sparkplug.Long(0)})
}

// temp publishes a DDATA of dev1 with temp by its alias only.
func (n *spNode) temp(ts uint64, v float64, seq int) {
	n.publish(sparkplug.DDATA, "dev1", ts, seq,
		sparkplug.Metric{Alias: 1, HasAlias: true, Datatype: sparkplug.TypeDouble, Value: sparkplug.Double(v)})
}

func (n *spNode) death(ts uint64) {
	n.publish(sparkplug.NDEATH, "", ts, -1,
		sparkplug.Metric{Name: []byte(sparkplug.BdSeqMetric), Datatype: sparkplug.TypeUInt64, Value: sparkplug.Long(n.bdSeq)})
	n.bdSeq++
}

// TestSparkplugSource_Mosquitto: an edge node's births, data by alias,
// a seq gap and its death, through mosquitto into the real binary. The
// agent is killed after the births were checkpointed: the aliases come
// back with the checkpoint, so data after the restart is read. The data
// behind the gap is dead-lettered (seq_gap, then before_birth until the
// rebirth) and counted; the death makes the node's and device's last
// values stale readings. The refused data is answered with one NCMD
// rebirth (request_rebirth).
func TestSparkplugSource_Mosquitto(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t)
	r := newCrashRun(t, sparkplugSourceConfig, "%BROKER%", b.URL(), "%CLIENT%", "eddy-sp", "%SOURCE_EXTRA%", "request_rebirth = true")
	r.ready = func() bool { return sourceConnected(r.admin, "scada") }
	r.start()
	n := newSPNode(t, b.URL(), "edge1")
	var rebirths atomic.Int32
	if tok := n.c.Subscribe("spBv1.0/plant1/NCMD/edge1", 0, func(_ paho.Client, m paho.Message) {
		var p sparkplug.Payload
		if sparkplug.DecodePayload(m.Payload(), &p) == nil && len(p.Metrics) == 1 &&
			string(p.Metrics[0].Name) == sparkplug.RebirthMetric && p.Metrics[0].Value.Equal(sparkplug.Bool(true)) {
			rebirths.Add(1)
		}
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe NCMD: %v", tok.Error())
	}

	n.births(spBase, 20)
	for i := 1; i <= 5; i++ {
		n.temp(spBase+uint64(i)*1000, 20+float64(i), -1)
	}
	// The births are in a checkpoint, and so is this message's pair of
	// readings, which "metrics" still holds for the watermark: kill the
	// agent.
	r.p.waitCheckpointAfter(t, 30*time.Second, func() {
		n.publish(sparkplug.DDATA, "dev1", spBase+6000, -1,
			sparkplug.Metric{Alias: 2, HasAlias: true, Datatype: sparkplug.TypeInt64, Value: sparkplug.Long(1)},
			sparkplug.Metric{Alias: 1, HasAlias: true, Datatype: sparkplug.TypeDouble, Value: sparkplug.Double(26)})
	})
	r.kill()
	r.start()
	for i := range 5 {
		n.temp(spBase+10_000+uint64(i)*1000, 30+float64(i), -1)
	}
	n.temp(spBase+15_000, 99, int(n.seq)+1) // a gap
	n.temp(spBase+15_500, 98, -1)           // refused until the rebirth
	await.True(t, 30*time.Second, "an NCMD rebirth", func() bool { return rebirths.Load() > 0 })
	n.bdSeq++
	n.births(spBase+16_000, 35)
	n.temp(spBase+17_000, 36, -1)
	n.death(spBase + 18_000)
	// A later session moves the watermark past both windows.
	n.births(spBase+100_000, 0)

	got := r.waitResults(4)
	want := map[string]string{
		"edge1/dev1/1.7e+12-1.70000001e+12":        "n=7 sum=161", // lastFirings prints the bounds as %v of float64
		"edge1/dev1/1.70000001e+12-1.70000002e+12": "n=7 sum=231",
		// Every metric of dev1: the births' and the killed run's last
		// message's two metrics share a timestamp and a message, and
		// each counts, restored from the checkpoint or not.
		"edge1/dev1/all/1.7e+12-1.70000001e+12":        "n=9 sum=162",
		"edge1/dev1/all/1.70000001e+12-1.70000002e+12": "n=8 sum=231",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("window %s: %q, want %q (all: %v)", k, got[k], w, got)
		}
	}

	checkSparkplugOutputs(t, r, []string{sparkplug.ReasonSeqGap, sparkplug.ReasonBeforeBirth},
		[]string{"/Node Control/Rebirth=false", "/bdSeq=1", "dev1/count=0", "dev1/temp=36"})
	if n := rebirths.Load(); n != 1 {
		t.Errorf("%d NCMD rebirths, want 1: the data refused after the gap asks once", n)
	}
	r.stop()
}

// jsonText is a decoded JSON value as text, strings without quotes.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

// checkSparkplugOutputs waits for the dead letters of pipeline "means"
// (their reasons, in order) and the stale readings
// ("device/metric=value", in any order) that a run of
// sparkplugSourceConfig should write, and checks the seq_gap count.
func checkSparkplugOutputs(t *testing.T, r *mqttCrashRun, wantDead, wantStale []string) {
	t.Helper()
	var dead []string
	await.Until(t, 30*time.Second, func() error {
		dead = dead[:0]
		for _, d := range readOutputs(t, filepath.Join(r.dir, "dead")) {
			dead = append(dead, d["reason"].(string))
		}
		if len(dead) < len(wantDead) {
			return fmt.Errorf("dead letters %v", dead)
		}
		return nil
	})
	if !slices.Equal(dead, wantDead) {
		t.Errorf("dead letters %v, want %v", dead, wantDead)
	}
	if v := metricValue(t, r.admin, `eddy_readings_dead_lettered_total{pipeline="means",reason="seq_gap"}`); v != 1 {
		t.Errorf("seq_gap counted %v times, want 1", v)
	}

	var stale []string
	await.Until(t, 30*time.Second, func() error {
		stale = stale[:0]
		for _, s := range readOutputs(t, filepath.Join(r.dir, "stale")) {
			stale = append(stale, s["device"].(string)+"/"+s["metric"].(string)+"="+jsonText(s["value"]))
		}
		if len(stale) < len(wantStale) {
			return fmt.Errorf("stale readings %v", stale)
		}
		return nil
	})
	slices.Sort(stale)
	if !slices.Equal(stale, wantStale) {
		t.Errorf("stale readings %v, want %v", stale, wantStale)
	}
}

// TestSparkplugSource_SparkplugClient: Cirrus Link's edge node client
// publishes births, data by alias and, after a forced seq gap and the
// agent's NCMD rebirth, its births again, then its death, through
// mosquitto; the real binary's windows hold exactly its readings, the
// message behind the gap is dead-lettered, and the death leaves stale
// readings.
func TestSparkplugSource_SparkplugClient(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t)
	r := newCrashRun(t, sparkplugSourceConfig, "%BROKER%", b.URL(), "%CLIENT%", "eddy-spjs", "%SOURCE_EXTRA%", "request_rebirth = true")
	r.ready = func() bool { return sourceConnected(r.admin, "scada") }
	r.start()
	e := sparkplugclient.Start(t, b.URL(), "plant1", "edgejs", "edge-js")

	type cmd = sparkplugclient.Command
	data := func(from, to int) {
		for i := from; i <= to; i++ {
			e.Do(cmd{Op: "data", TS: spBase + int64(i)*400, Temp: float64(i)})
		}
	}
	e.Do(cmd{Op: "births", TS: spBase, Temp: 20})
	data(1, 24) // window 1: 20 and 1…24
	e.Do(cmd{Op: "rebirth", TS: spBase + 10_000, Temp: 100}, cmd{Op: "gap"},
		cmd{Op: "data", TS: spBase + 10_400, Temp: 999}) // refused: seq_gap
	e.WaitFor("ncmd rebirth")
	data(26, 49)                                         // window 2: 100 and 26…49
	e.Do(cmd{Op: "data", TS: spBase + 100_000, Temp: 0}) // the watermark passes both
	got := r.waitResults(4)                              // "means" and "metrics"
	want := map[string]string{
		"edgejs/dev1/1.7e+12-1.70000001e+12":        "n=25 sum=320",
		"edgejs/dev1/1.70000001e+12-1.70000002e+12": "n=25 sum=1000",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("window %s: %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
	e.Do(cmd{Op: "stop"})
	checkSparkplugOutputs(t, r, []string{sparkplug.ReasonSeqGap},
		[]string{"/Node Control/Rebirth=false", "/bdSeq=0", "dev1/count=0", "dev1/temp=0"})
	if v := metricValue(t, r.admin, `eddy_sparkplug_rebirth_requests_total{source="scada"}`); v != 1 {
		t.Errorf("%v rebirth requests, want 1", v)
	}
	r.stop()
}
