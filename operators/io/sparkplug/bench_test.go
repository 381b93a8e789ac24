package sparkplug

import (
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/record"
)

// typicalResult is a 4-aggregate window result, the shape of the
// examples' temperature pipelines.
var typicalResult = record.Result{
	Pipeline: "temp_1m", Key: []byte("sensor-3"), Start: 1795946400000, End: 1795946460000,
	Kind: record.KindFinal, Names: []string{"avg_temp", "max_temp", "min_temp", "n"},
	Values: []float64{21.43, 22.1, 20.9, 12},
}

// bornNode is a node whose births and the typical key's DBIRTH are out.
func bornNode(b *testing.B) *Node {
	n, err := NewNode(Config{Group: "plant1", Node: "gw-7"})
	if err != nil {
		b.Fatal(err)
	}
	n.Connect(0, 1)
	n.Connected(2)
	r := &typicalResult
	if _, ok := n.Result(r.Key, r.Names, r.Values, r.Start, false, r.End); !ok {
		b.Fatal("not born")
	}
	return n
}

// BenchmarkEncodeDData is the node's per-result cost: one DDATA of four
// Double metrics by alias. It reports the DDATA's size beside the JSON
// record's (the WAL sink's payload) for the same result.
func BenchmarkEncodeDData(b *testing.B) {
	n := bornNode(b)
	r := &typicalResult
	var size int
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		acts, _ := n.Result(r.Key, r.Names, r.Values, r.Start, false, r.End)
		size = len(acts[0].Payload)
	}
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu).Seconds(), "results/cpu-s")
	b.ReportMetric(float64(size), "sparkplug-bytes/result")
	jsonSize := len(record.AppendJSON(nil, "gw-7", r))
	b.ReportMetric(float64(jsonSize), "json-bytes/result")
	// On the wire: the whole MQTT 3.1.1 exchange of one result. Sparkplug's
	// DDATA is a QoS 0 PUBLISH; the MQTT sink's JSON is a QoS 2 PUBLISH
	// (two more bytes of packet id) with PUBREC, PUBREL and PUBCOMP (four
	// bytes each), under the topic of examples/full.hcl's sink.
	ddataTopic := Topic{Type: DDATA, Group: "plant1", Node: "gw-7", Device: DeviceID(r.Key)}.String()
	b.ReportMetric(float64(publishSize(len(ddataTopic), size, 0)), "sparkplug-wire-bytes/result")
	b.ReportMetric(float64(publishSize(len("sites/gw-7/temp_1m"), jsonSize, 2)+3*4), "json-qos2-wire-bytes/result")
}

// publishSize is the size of an MQTT 3.1.1 PUBLISH packet: fixed header
// (type byte and remaining length), topic with its length, the packet id
// above QoS 0, and the payload.
func publishSize(topic, payload int, qos byte) int {
	rest := 2 + topic + payload
	if qos > 0 {
		rest += 2
	}
	lenBytes := 1
	for n := rest; n >= 128; n >>= 7 {
		lenBytes++
	}
	return 1 + lenBytes + rest
}

// BenchmarkDecodeDData decodes DDATA of the typical result;
// readings/cpu-s is metrics decoded per second of the process's CPU time
// (user and system), which a loaded machine's wall clock would understate.
func BenchmarkDecodeDData(b *testing.B) {
	n := bornNode(b)
	r := &typicalResult
	acts, _ := n.Result(r.Key, r.Names, r.Values, r.Start, false, r.End)
	payload := append([]byte(nil), acts[0].Payload...)
	var p Payload
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		if err := DecodePayload(payload, &p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(p.Metrics))/(cpuTime(b)-cpu).Seconds(), "readings/cpu-s")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReaderDData is the source side: DDATA of the typical result
// through a Reader (decode, seq check, aliases resolved to names), in
// readings per CPU-second.
func BenchmarkReaderDData(b *testing.B) { benchReader(b, false) }

// BenchmarkReaderDDataJSON is what a sparkplug_b source's prepare stage
// does before the pipeline's own decoding: the Reader, and each reading
// written as the JSON object the pipeline reads.
func BenchmarkReaderDDataJSON(b *testing.B) { benchReader(b, true) }

func benchReader(b *testing.B, asJSON bool) {
	n, err := NewNode(Config{Group: "plant1", Node: "gw-7"})
	if err != nil {
		b.Fatal(err)
	}
	r := NewReader()
	feed := func(acts []Action) {
		for _, a := range acts {
			if reason, detail := r.Message(a.Topic, a.Payload, func(*Reading) {}); reason != "" {
				b.Fatal(reason, detail)
			}
		}
	}
	n.Connect(0, 1)
	feed(n.Connected(2))
	res := &typicalResult
	acts, _ := n.Result(res.Key, res.Names, res.Values, res.Start, false, res.End)
	feed(acts)
	// 256 DDATAs, one full turn of seq, replayed in order.
	var topic string
	var payloads [][]byte
	for range 256 {
		acts, _ := n.Result(res.Key, res.Names, res.Values, res.Start, false, res.End)
		topic = acts[0].Topic
		payloads = append(payloads, append([]byte(nil), acts[0].Payload...))
	}
	readings := 0
	var buf []byte
	count := func(rd *Reading) {
		readings++
		if asJSON {
			buf = AppendReadingJSON(buf[:0], rd)
		}
	}
	b.ReportAllocs()
	cpu := cpuTime(b)
	i := 0
	for b.Loop() {
		if reason, detail := r.Message(topic, payloads[i%256], count); reason != "" {
			b.Fatal(reason, detail)
		}
		i++
	}
	b.ReportMetric(float64(readings)/(cpuTime(b)-cpu).Seconds(), "readings/cpu-s")
}
