package e2e

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/io/sparkplug"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// sparkplugCrashConfig is mqttCrashConfig reading the same readings as
// Sparkplug B device data: one metric "v" per device, by alias, stamped
// with its own timestamp.
var sparkplugCrashConfig = strings.NewReplacer(
	`topics    = ["sensors/+/telemetry"]`, `topics    = ["spBv1.0/crash/#"]
  format    = "sparkplug_b"`,
	`  timestamp {
    field = "ts"
    unit  = "ms"
  }
`, "",
	`  key  = event.device`, `  filter = event.metric == "v" && !event.stale
  key  = event.device`,
	`sum(event.v)`, `sum(event.value)`,
).Replace(mqttCrashConfig)

// sparkplugBirthTs stamps the births an hour before the readings: their
// values (0) fill windows of their own, which fire before the readings'.
const sparkplugBirthTs = 1_700_000_000_000 - 3_600_000

// sendSparkplugReadings publishes sendReadings' readings as one edge
// node's DDATA, each device's "v" by its alias, after the node's and every
// device's births; at QoS 1 so that a killed agent's session keeps them.
func sendSparkplugReadings(url, client string, readings, devices int, between func(i int)) error {
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(client).SetMaxResumePubInFlight(1000))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	var seq uint64
	var toks []paho.Token
	publish := func(typ sparkplug.MessageType, device string, ts uint64, ms ...sparkplug.Metric) {
		p := sparkplug.Payload{Timestamp: ts, HasTimestamp: true, Seq: seq, HasSeq: true, Metrics: ms}
		seq = (seq + 1) % 256
		topic := sparkplug.Topic{Group: "crash", Type: typ, Node: "edge", Device: device}.String()
		toks = append(toks, pub.Publish(topic, 1, false, sparkplug.AppendPayload(nil, &p)))
	}
	wait := func() error {
		for _, tok := range toks {
			if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				return fmt.Errorf("publish: %v", tok.Error())
			}
		}
		toks = toks[:0]
		return nil
	}
	publish(sparkplug.NBIRTH, "", sparkplugBirthTs,
		sparkplug.Metric{Name: []byte(sparkplug.BdSeqMetric), Datatype: sparkplug.TypeUInt64, Value: sparkplug.Long(0)})
	for d := range devices {
		publish(sparkplug.DBIRTH, "dev-"+strconv.Itoa(d), sparkplugBirthTs,
			sparkplug.Metric{Name: []byte("v"), Alias: uint64(d + 1), HasAlias: true, Datatype: sparkplug.TypeDouble, Value: sparkplug.Double(0)})
	}
	if err := wait(); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(11, 12))
	base := int64(1_700_000_000_000)
	data := func(d int, ts int64, v int) {
		publish(sparkplug.DDATA, "dev-"+strconv.Itoa(d), uint64(ts),
			sparkplug.Metric{Alias: uint64(d + 1), HasAlias: true, Datatype: sparkplug.TypeDouble, Value: sparkplug.Double(float64(v))})
	}
	const batch = 1000
	for i := 0; i < readings; i += batch {
		for j := i; j < i+batch && j < readings; j++ {
			ts := base + int64(j)*5 + rng.Int64N(3000)
			data(j%devices, ts, rng.IntN(100))
		}
		if err := wait(); err != nil {
			return err
		}
		between(i)
	}
	data(0, base+int64(readings)*5+3_600_000, 0) // moves the watermark past every window
	return wait()
}

// TestCrash_MQTTSparkplugExactlyOnce is TestCrash_MQTTExactlyOnce with
// Sparkplug B input: the reader's aliases and seq come back with each
// restored checkpoint, so the committed windows equal an uninterrupted
// run's, which equal the readings' own.
func TestCrash_MQTTSparkplugExactlyOnce(t *testing.T) {
	t.Parallel()
	readings, devices, kills := crashScale()
	b := mosquitto.Start(t)
	expected := expectedWindows(readings, devices)
	for d := range devices {
		expected[fmt.Sprintf("dev-%d/%v-%v", d, float64(sparkplugBirthTs), float64(sparkplugBirthTs+10000))] = "n=1 sum=0"
	}
	run := func(name string, between func(r *mqttCrashRun) func(int)) *mqttCrashRun {
		r := newCrashRun(t, sparkplugCrashConfig, "%BROKER%", b.URL(), "%CLIENT%", "eddy-"+name)
		r.start()
		if err := sendSparkplugReadings(b.URL(), "edge-"+name, readings, devices, between(r)); err != nil {
			t.Fatal(err)
		}
		return r
	}
	clean := run("clean", func(*mqttCrashRun) func(int) { return func(int) {} })
	want := clean.finalResults(len(expected))
	sameWindows(t, expected, want, 0)
	run("crashed", func(r *mqttCrashRun) func(int) { return r.killsAt(readings, kills) }).sameAfterKills(want, kills)
	t.Logf("%d Sparkplug readings, %d kills: %d windows identical to the uninterrupted run", readings, kills, len(want))
}
