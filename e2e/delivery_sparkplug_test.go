package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/scripts/sparkplugjs"
)

// sparkplugFileConfig reads a file to its end and publishes every window
// as a Sparkplug edge node.
const sparkplugFileConfig = `
agent {
  device_id   = "gw-7"
  data_dir    = "%DATA%"
  admin       = ""
  parallelism = 2
}
source "file" "in" {
  path = "%DIR%/in.jsonl"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "0s" }
}
sink "sparkplug" "scada" {
  broker   = "%UPSTREAM%"
  group_id = "plant1"
}
pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
  }
  to = [sink.sparkplug.scada]
}
checkpoint { interval = "200ms" }
`

// sparkplugMsg is one message a host application received: its topic, in
// arrival order, and its payload as sparkplug-payload decodes it.
type sparkplugMsg struct {
	topic   string
	raw     []byte
	payload sparkplugjs.Payload
}

// sparkplugHost records, in order, every message under spBv1.0/ on a
// broker, as a host application subscribed to the namespace sees them.
type sparkplugHost struct {
	mu     sync.Mutex
	msgs   []sparkplugMsg
	client paho.Client
}

func newSparkplugHost(t *testing.T, url string) *sparkplugHost {
	h := &sparkplugHost{}
	// A persistent session (on a broker that queues QoS 0 for it): what
	// the edge node publishes while the host reconnects after a broker
	// restart still reaches it, in order.
	opts := paho.NewClientOptions().AddBroker(url).SetClientID("scada-host").SetCleanSession(false).
		SetAutoReconnect(true).SetMaxReconnectInterval(500 * time.Millisecond).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			h.mu.Lock()
			h.msgs = append(h.msgs, sparkplugMsg{topic: m.Topic(), raw: append([]byte(nil), m.Payload()...)})
			h.mu.Unlock()
		})
	h.client = paho.NewClient(opts)
	if tok := h.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("host connect: %v", tok.Error())
	}
	t.Cleanup(func() { h.client.Disconnect(100) })
	if tok := h.client.Subscribe("spBv1.0/#", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("host subscribe: %v", tok.Error())
	}
	return h
}

// count is the number of messages received whose topic has the message
// type typ (NBIRTH, DDATA, …).
func (h *sparkplugHost) count(typ string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if levels := strings.Split(m.topic, "/"); levels[1] != "STATE" && levels[2] == typ {
			n++
		}
	}
	return n
}

// decoded decodes every message received so far with Cirrus Link's
// sparkplug-payload and returns them in arrival order. A message that is
// not a Sparkplug payload (STATE, which is JSON) is left undecoded.
func (h *sparkplugHost) decoded(t *testing.T) []sparkplugMsg {
	h.mu.Lock()
	msgs := append([]sparkplugMsg(nil), h.msgs...)
	h.mu.Unlock()
	var raw [][]byte
	var at []int
	for i, m := range msgs {
		if !strings.HasPrefix(m.topic, "spBv1.0/STATE/") {
			raw = append(raw, m.raw)
			at = append(at, i)
		}
	}
	dec, _ := sparkplugjs.Run(t, raw, nil)
	for j, i := range at {
		msgs[i].payload = dec[j]
	}
	return msgs
}

// jsNumber reads a number sparkplug-payload wrote (64-bit integers as
// decimal strings).
func jsNumber(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			t.Fatalf("number %q: %v", x, err)
		}
		return f
	case fmt.Stringer: // json.Number
		f, err := strconv.ParseFloat(x.String(), 64)
		if err != nil {
			t.Fatalf("number %v: %v", x, err)
		}
		return f
	}
	t.Fatalf("not a number: %#v", v)
	return 0
}

// metricByName is the metric called name in p, or nil.
func metricByName(p sparkplugjs.Payload, name string) *sparkplugjs.Metric {
	for i := range p.Metrics {
		if p.Metrics[i].Name != nil && *p.Metrics[i].Name == name {
			return &p.Metrics[i]
		}
	}
	return nil
}

// sparkplugSession checks the messages of one edge node as a host
// application would and returns the window results the DDATAs carried,
// keyed as writeWindowReadings keys them (device/start-end → "n=… sum=…"),
// with the is_historical flag of each, and the bdSeq of every NBIRTH and
// NDEATH in order: every NBIRTH has seq 0, bdSeq (UInt64) and Node
// Control/Rebirth (Boolean); seq runs on by one, mod 256, over every
// message of a session; a DDATA's device had its DBIRTH in the session,
// and each metric's alias is one that DBIRTH announced, with its
// datatype: Int64 for the count n, Double for the sum.
func sparkplugSession(t *testing.T, msgs []sparkplugMsg, windowMs float64) (results map[string]string, historical map[string]bool, births, deaths []string, repeats int) {
	t.Helper()
	results, historical = map[string]string{}, map[string]bool{}
	var seq float64 = -1
	aliases := map[string]map[string]string{} // device → alias → name
	// The datatypes from the aggregates' field types: a count is an
	// integer, a sum a number.
	wantType := map[string]string{"n": "Int64", "sum": "Double"}
	for i, m := range msgs {
		levels := strings.Split(m.topic, "/")
		if levels[1] == "STATE" {
			continue
		}
		typ := levels[2]
		p := m.payload
		switch typ {
		case "NCMD":
			continue
		case "NDEATH":
			bd := metricByName(p, "bdSeq")
			if bd == nil || bd.Type != "UInt64" || p.Seq != nil {
				t.Fatalf("message %d: NDEATH %+v: want a UInt64 bdSeq and no seq", i, p)
			}
			deaths = append(deaths, fmt.Sprint(jsNumber(t, bd.Value)))
			seq = -1
			continue
		}
		if p.Seq == nil {
			t.Fatalf("message %d: %s has no seq", i, m.topic)
		}
		s := jsNumber(t, p.Seq)
		if typ == "NBIRTH" {
			bd, rb := metricByName(p, "bdSeq"), metricByName(p, "Node Control/Rebirth")
			if s != 0 || bd == nil || bd.Type != "UInt64" || rb == nil || rb.Type != "Boolean" || rb.Value != false {
				t.Fatalf("message %d: NBIRTH %+v: want seq 0, a UInt64 bdSeq and Node Control/Rebirth = false", i, p)
			}
			births = append(births, fmt.Sprint(jsNumber(t, bd.Value)))
			aliases = map[string]map[string]string{}
			seq = 0
			continue
		}
		if seq < 0 {
			t.Fatalf("message %d: %s before any NBIRTH of the session", i, m.topic)
		}
		if want := math.Mod(seq+1, 256); s != want {
			t.Fatalf("message %d: %s has seq %v, want %v (seq gap)", i, m.topic, s, want)
		}
		seq = s
		device := levels[4]
		switch typ {
		case "DBIRTH":
			a := map[string]string{}
			for _, mt := range p.Metrics {
				if mt.Name == nil || mt.Alias == nil || mt.Type != wantType[*mt.Name] {
					t.Fatalf("message %d: DBIRTH metric %+v: want a name, an alias and the datatype %v", i, mt, wantType)
				}
				a[fmt.Sprint(jsNumber(t, mt.Alias))] = *mt.Name
			}
			aliases[device] = a
		case "DDEATH":
			delete(aliases, device)
		case "DDATA":
			a := aliases[device]
			if a == nil {
				t.Fatalf("message %d: DDATA of %s before its DBIRTH", i, device)
			}
			vals := map[string]float64{}
			var ts float64
			hist := false
			for _, mt := range p.Metrics {
				name, ok := a[fmt.Sprint(jsNumber(t, mt.Alias))]
				if !ok || mt.Type != wantType[name] {
					t.Fatalf("message %d: DDATA metric %+v: alias not in the DBIRTH, or not the DBIRTH's datatype", i, mt)
				}
				vals[name] = jsNumber(t, mt.Value)
				ts = jsNumber(t, mt.Timestamp)
				hist = mt.IsHistorical != nil && *mt.IsHistorical
			}
			k := fmt.Sprintf("%s/%v-%v", device, ts-windowMs, ts)
			if _, dup := results[k]; dup {
				repeats++
			}
			results[k] = fmt.Sprintf("n=%v sum=%v", vals["n"], vals["sum"])
			historical[k] = hist
		default:
			t.Fatalf("message %d: unexpected %s", i, m.topic)
		}
	}
	return results, historical, births, deaths, repeats
}

// TestSparkplug_ResultsDecodedByTahu: every window of a finite run reaches
// a host application through mosquitto as Sparkplug B that Cirrus Link's
// decoder reads: NBIRTH (bdSeq 0, seq 0), a DBIRTH per device before its
// first DDATA, one DDATA per window with the window's n (Int64) and sum
// (Double) as metrics stamped with the window's end, seq continuous across the node,
// and at the end of the run an NDEATH with the NBIRTH's bdSeq.
func TestSparkplug_ResultsDecodedByTahu(t *testing.T) {
	t.Parallel()
	up := mosquitto.Start(t)
	host := newSparkplugHost(t, up.URL())
	dir := t.TempDir()
	want := writeWindowReadings(t, filepath.Join(dir, "in.jsonl"), 20, 15) // 300 windows: seq wraps
	if _, err := runEddy(t, "run", "-c", writeConfig(t, dir, sparkplugFileConfig, "%UPSTREAM%", up.URL())); err != nil {
		t.Fatalf("eddy run: %v", err)
	}
	await.True(t, 30*time.Second, "the NDEATH of the run's end", func() bool { return host.count("NDEATH") >= 1 })
	got, _, births, deaths, repeats := sparkplugSession(t, host.decoded(t), 10000)
	if strings.Join(births, ",") != "0" || strings.Join(deaths, ",") != "0" {
		t.Errorf("NBIRTH bdSeqs %v, NDEATH bdSeqs %v; want [0] and [0]", births, deaths)
	}
	if repeats > 0 {
		t.Errorf("%d windows published more than once in an uninterrupted run", repeats)
	}
	if len(got) != len(want) {
		t.Errorf("%d windows published, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("window %s: %q, want %q", k, got[k], w)
		}
	}
	// Windows that fired before the node was first born (the file is read
	// faster than the sink connects) were held and come first, flagged
	// historical; none after a live one.
	live := 0
	for _, m := range host.decoded(t) {
		if !strings.Contains(m.topic, "/DDATA/") {
			continue
		}
		if h := m.payload.Metrics[0].IsHistorical; h != nil && *h {
			if live > 0 {
				t.Fatalf("a historical DDATA after %d live ones", live)
			}
			continue
		}
		live++
	}
	t.Logf("%d of %d windows held until the first births, %d live", len(want)-live, len(want), live)
}

// sparkplugMQTTConfig reads sensors from one broker and is a Sparkplug
// edge node on another.
const sparkplugMQTTConfig = `
agent {
  device_id = "gw-7"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "mqtt" "sensors" {
  broker    = "%SENSORS%"
  client_id = "eddy-sensors"
  topics    = ["sensors/+"]
  qos       = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "0s" }
}
sink "sparkplug" "scada" {
  broker       = "%UPSTREAM%"
  group_id     = "plant1"
  edge_node_id = "line-${device_id}"
}
pipeline "sums" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
  }
  to = [sink.sparkplug.scada]
}
checkpoint { interval = "200ms" }
`

// publishWindow publishes one window's readings of device (ten, one a
// second, v = 1…10) starting at start; the first of them moves the
// watermark past the previous window's end, which fires it.
func publishWindow(t *testing.T, c paho.Client, device string, start int64) {
	t.Helper()
	for i := range 10 {
		payload := fmt.Sprintf(`{"device":%q,"ts":%d,"v":%d}`, device, start+int64(i)*1000, i+1)
		if tok := c.Publish("sensors/"+device, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
}

// startSparkplugEdge starts the sensors' broker, the Sparkplug broker
// (queueing QoS 0 for the host's persistent session), a host subscribed
// to the namespace, a sensor publisher and the agent (sparkplugMQTTConfig
// in dir), and waits for its first NBIRTH and its source's connection.
func startSparkplugEdge(t *testing.T) (up *mosquitto.Broker, host *sparkplugHost, pub paho.Client, p *eddyProc, dir string) {
	t.Helper()
	sensors := mosquitto.Start(t)
	up = mosquitto.Start(t, mosquitto.Conf("queue_qos0_messages true"))
	host = newSparkplugHost(t, up.URL())
	pub = paho.NewClient(paho.NewClientOptions().AddBroker(sensors.URL()).SetClientID("sensor-pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	t.Cleanup(func() { pub.Disconnect(100) })
	dir = t.TempDir()
	p = startAgent(t, dir, sparkplugMQTTConfig, "%SENSORS%", sensors.URL(), "%UPSTREAM%", up.URL())
	await.True(t, 30*time.Second, "the first NBIRTH", func() bool { return host.count("NBIRTH") >= 1 })
	await.True(t, 30*time.Second, "the source connected", func() bool { return p.connected(t, "sensors") })
	return up, host, pub, p, dir
}

// TestSparkplug_RebirthKillAndOutage: a running agent, as edge node
// line-gw-7, answers a host's NCMD Node Control/Rebirth (encoded by
// sparkplug-payload) with NBIRTH and DBIRTH under the same bdSeq; keeps
// the windows that fire while its Sparkplug broker is down (30 s) and
// publishes them after its next births, in order, flagged is_historical; and when it
// is killed with SIGKILL the broker publishes its will, the NDEATH of the
// current bdSeq. A restart takes the next bdSeq.
func TestSparkplug_RebirthKillAndOutage(t *testing.T) {
	t.Parallel()
	up, host, pub, p, dir := startSparkplugEdge(t)

	const base = int64(1_700_000_000_000)
	publishWindow(t, pub, "dev-1", base)
	publishWindow(t, pub, "dev-1", base+10000)
	await.True(t, 30*time.Second, "the first DDATA", func() bool { return host.count("DDATA") >= 1 })

	_, enc := sparkplugjs.Run(t, nil, []sparkplugjs.Payload{{
		Timestamp: strconv.FormatInt(time.Now().UnixMilli(), 10),
		Metrics:   []sparkplugjs.Metric{{Name: ptr("Node Control/Rebirth"), Type: "Boolean", Value: true}},
	}})
	if tok := host.client.Publish("spBv1.0/plant1/NCMD/line-gw-7", 0, false, enc[0]); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	await.True(t, 30*time.Second, "the rebirth's NBIRTH and DBIRTH", func() bool { return host.count("NBIRTH") >= 2 && host.count("DBIRTH") >= 2 })

	// The Sparkplug broker goes away while two windows fire. A QoS 0
	// message written before the node notices is lost unseen (as the
	// documentation says), so the windows fire once it has.
	up.Stop()
	await.True(t, 30*time.Second, "the node not born", func() bool {
		return metricValue(t, p.admin, `eddy_sparkplug_born{sink="scada"}`) == 0
	})
	publishWindow(t, pub, "dev-1", base+20000)
	publishWindow(t, pub, "dev-1", base+30000)
	await.True(t, 30*time.Second, "two more windows fired while the broker is down", func() bool {
		st := p.status(t)
		return len(st) == 1 && st[0].ResultsOut >= 3
	})
	// A 30 s outage: the two windows stay held, the node unborn, all along.
	await.Never(t, 30*time.Second, func() error {
		held, born := metricValue(t, p.admin, `eddy_sparkplug_held{sink="scada"}`), metricValue(t, p.admin, `eddy_sparkplug_born{sink="scada"}`)
		if held != 2 || born != 0 {
			return fmt.Errorf("while the broker is down: %v results held, born %v; want 2 held, not born", held, born)
		}
		return nil
	})
	up.Restart()
	await.True(t, 60*time.Second, "the windows of the outage", func() bool { return host.count("DDATA") >= 3 })

	p.kill()
	await.True(t, 30*time.Second, "the will's NDEATH", func() bool { return host.count("NDEATH") >= 1 })
	p = startEddy(t, "run", "-c", filepath.Join(dir, "agent.hcl"))
	await.True(t, 30*time.Second, "the NBIRTH after the restart", func() bool { return host.count("NBIRTH") >= 4 })
	p.kill()

	msgs := host.decoded(t)
	// The host's own NCMD came back through its subscription; the outage
	// cut the host's own connection too, so what it holds runs from its
	// reconnection: a session check from each NBIRTH on.
	got, hist, births, deaths, repeats := sparkplugSession(t, msgs, 10000)
	t.Logf("%d windows published again after the restart (at least once across a crash)", repeats)
	if strings.Join(births, ",") != "0,0,1,2" {
		t.Errorf("NBIRTH bdSeqs %v, want 0 (start), 0 (rebirth), 1 (after the outage), 2 (after the restart)", births)
	}
	// The will the SIGKILL set off: the NDEATH between the session of
	// bdSeq 1 and the restart's NBIRTH carries bdSeq 1.
	will := ""
	for _, m := range msgs {
		if strings.Contains(m.topic, "/NDEATH/") {
			will = fmt.Sprint(jsNumber(t, metricByName(m.payload, "bdSeq").Value))
		}
		if strings.Contains(m.topic, "/NBIRTH/") && fmt.Sprint(jsNumber(t, metricByName(m.payload, "bdSeq").Value)) == "2" {
			break
		}
	}
	if will != "1" || !slices.Contains(deaths, "1") {
		t.Errorf("NDEATH bdSeqs %v, the last before the restart's NBIRTH %q: want the SIGKILL's will, bdSeq 1", deaths, will)
	}
	for k, w := range map[string]string{
		fmt.Sprintf("dev-1/%v-%v", float64(base), float64(base+10000)):       "n=10 sum=55",
		fmt.Sprintf("dev-1/%v-%v", float64(base+10000), float64(base+20000)): "n=10 sum=55",
		fmt.Sprintf("dev-1/%v-%v", float64(base+20000), float64(base+30000)): "n=10 sum=55",
	} {
		if got[k] != w {
			t.Errorf("window %s: %q, want %q", k, got[k], w)
		}
	}
	if h := hist[fmt.Sprintf("dev-1/%v-%v", float64(base), float64(base+10000))]; h {
		t.Errorf("the window published live is flagged historical")
	}
	for _, start := range []int64{base + 10000, base + 20000} {
		if k := fmt.Sprintf("dev-1/%v-%v", float64(start), float64(start+10000)); !hist[k] {
			t.Errorf("window %s, fired while the broker was down, is not flagged historical", k)
		}
	}
	// Before the restart, which may publish again what the last checkpoint
	// did not cover.
	var order []float64
	nbirths := 0
	for _, m := range msgs {
		if strings.Contains(m.topic, "/NBIRTH/") {
			if nbirths++; nbirths == 4 {
				break
			}
		}
		if strings.Contains(m.topic, "/DDATA/") {
			order = append(order, jsNumber(t, m.payload.Metrics[0].Timestamp))
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("DDATA window ends out of order: %v", order)
	}
}

func ptr[T any](v T) *T { return &v }

// TestSparkplug_OutageKillReplay: the node speaks MQTT 5 to mosquitto;
// windows that fire while the Sparkplug broker is down are kept in the sink's log on disk: a SIGKILL of the
// agent during the outage loses none, and after the restart (the broker
// still down) and the broker's return they reach the host after the next
// births, in order, flagged is_historical, each once.
func TestSparkplug_OutageKillReplay(t *testing.T) {
	t.Parallel()
	up, host, pub, p, dir := startSparkplugEdge(t)
	// A reading of another device inside the current window: new input for
	// a checkpoint, no window fired.
	nudge := func(ts int64) func() {
		return func() {
			if tok := pub.Publish("sensors/nudge", 1, false, fmt.Sprintf(`{"device":"nudge","ts":%d,"v":0}`, ts)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}

	const base = int64(1_700_000_000_000)
	publishWindow(t, pub, "dev-1", base)
	publishWindow(t, pub, "dev-1", base+10000)
	await.True(t, 30*time.Second, "the live DDATA", func() bool { return host.count("DDATA") >= 1 })
	p.waitCheckpointAfter(t, 30*time.Second, nudge(base+10500))
	if v := metricValue(t, p.admin, `eddy_sparkplug_protocol_version{sink="scada"}`); v != 5 {
		t.Errorf("the node speaks MQTT %v to mosquitto, want 5 (the default)", v)
	}

	up.Stop()
	await.True(t, 30*time.Second, "the node not born", func() bool {
		return metricValue(t, p.admin, `eddy_sparkplug_born{sink="scada"}`) == 0
	})
	publishWindow(t, pub, "dev-1", base+20000)
	publishWindow(t, pub, "dev-1", base+30000)
	await.True(t, 30*time.Second, "the windows of the outage held", func() bool {
		return metricValue(t, p.admin, `eddy_sparkplug_held{sink="scada"}`) >= 2
	})
	// A checkpoint covers them: the restart does not compute them again,
	// so what comes back is what the log kept.
	p.waitCheckpointAfter(t, 30*time.Second, nudge(base+30500))
	p.kill()

	admin := p.admin
	p = startEddy(t, "run", "-c", filepath.Join(dir, "agent.hcl"))
	p.admin = admin
	await.True(t, 30*time.Second, "the held windows read back after the restart", func() bool {
		return metricValue(t, p.admin, `eddy_sparkplug_held{sink="scada"}`) >= 2
	})
	if !p.logContains("results kept from an earlier run") {
		t.Errorf("the restart did not read held results back from the log:\n%s", p.output())
	}
	up.Restart()
	key := func(start int64) string { return fmt.Sprintf("dev-1/%v-%v", float64(start), float64(start+10000)) }
	await.True(t, 60*time.Second, "the windows of the outage after the restart", func() bool {
		if host.count("DDATA") < 3 {
			return false
		}
		got, _, _, _, _ := sparkplugSession(t, host.decoded(t), 10000)
		return got[key(base+10000)] != "" && got[key(base+20000)] != ""
	})
	p.stop(os.Interrupt, 30*time.Second)

	got, hist, births, _, repeats := sparkplugSession(t, host.decoded(t), 10000)
	if repeats > 0 {
		t.Errorf("%d windows published more than once", repeats)
	}
	if len(births) != 2 {
		t.Errorf("NBIRTH bdSeqs %v, want two: the start's and the restart's", births)
	}
	for i, start := range []int64{base, base + 10000, base + 20000} {
		if got[key(start)] != "n=10 sum=55" {
			t.Errorf("window %s: %q, want n=10 sum=55", key(start), got[key(start)])
		}
		if want := i > 0; hist[key(start)] != want {
			t.Errorf("window %s: historical %v, want %v", key(start), hist[key(start)], want)
		}
	}
	var order []float64
	for _, m := range host.decoded(t) {
		if strings.Contains(m.topic, "/DDATA/dev-1") {
			order = append(order, jsNumber(t, m.payload.Metrics[0].Timestamp))
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("DDATA window ends out of order: %v", order)
	}
}
