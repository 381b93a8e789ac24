package operators

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/aggregate"
)

func mustCompile(tb testing.TB, src string, schema *event.Schema) *expr.Program {
	tb.Helper()
	e, diags := hclsyntax.ParseExpression([]byte(src), "bench.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	p, diags := expr.Compile(e, schema)
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	return p
}

// benchPipeline is decode → timestamp → filter → key → aggregate for one
// subtask, wired as the agent wires it, without goroutines.
type benchPipeline struct {
	prep  *Preparer
	task  *WindowTask
	batch *stream.Batch
}

func newBenchPipeline(tb testing.TB) *benchPipeline {
	schema := event.NewSchema()
	spec := PrepareSpec{Schema: schema, MaxKeyGroups: 128, Parallelism: 1}
	spec.Filter = mustCompile(tb, `event.temp != null && event.temp < 200`, schema)
	spec.Key = mustCompile(tb, `event.device`, schema)
	temp := mustCompile(tb, `event.temp`, schema)
	spec.AggArgs = []*expr.Program{nil, temp, temp, temp, temp}
	ts, err := decode.NewTimestamp(schema.Slot(event.Path{"ts"}), "ms", "")
	if err != nil {
		tb.Fatal(err)
	}
	spec.Timestamp = ts
	spec.Decoder = decode.NewJSON(schema)
	funcs := []string{"count", "sum", "min", "max", "avg"}
	var aggs []window.AggSpec
	for i, f := range funcs {
		fn, err := aggregate.ParseFunc(f)
		if err != nil {
			tb.Fatal(err)
		}
		arg := i
		if f == "count" {
			arg = -1
		}
		aggs = append(aggs, window.AggSpec{Func: fn, Arg: arg})
	}
	op, err := window.NewOperator(window.Spec{Assigner: window.Tumbling(60_000, 0, true), Aggs: aggs}, window.NewMemoryStore())
	if err != nil {
		tb.Fatal(err)
	}
	return &benchPipeline{
		prep:  NewPreparer(spec),
		task:  NewWindowTask("bench", "dev", funcs, op),
		batch: stream.NewBatch(len(aggs)),
	}
}

// BenchmarkPipeline_DecodeFilterKeyAggregate measures one reading through
// the whole per-reading path of a pipeline on one core: JSON decode,
// timestamp, filter, key, key group, batch, tumbling event-time window with
// count/sum/min/max/avg, over 1,000 devices. Firings are collected and
// encoded every 512 readings, as the agent does per batch.
func BenchmarkPipeline_DecodeFilterKeyAggregate(b *testing.B) {
	const devices = 1000
	// One payload per device with a fixed-width timestamp, rewritten in
	// place for every reading so event time moves on (10 ms per reading):
	// windows open, fire and are purged as in a real stream.
	payloads := make([][]byte, devices)
	tsAt := make([]int, devices)
	for i := range payloads {
		payloads[i] = fmt.Appendf(nil, `{"device":"sensor-%04d","ts":1700000000000,"temp":%.1f,"humidity":40.2,"meta":{"fw":"1.2.3","rssi":-70}}`,
			i, 15+float64(i%200)/10)
		tsAt[i] = bytes.Index(payloads[i], []byte(`"ts":`)) + 5
	}
	p := newBenchPipeline(b)
	base := int64(1_700_000_000_000)
	run := func(i int) {
		d := i % devices
		pl := payloads[d]
		strconv.AppendInt(pl[tsAt[d]:tsAt[d]], base+int64(i)*10, 10) // 13 digits, in place
		if p.prep.Prepare(pl, "sensors/x/telemetry", uint64(i), 0, math.MaxInt64/2, true) == Pass {
			p.batch.Append(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, pl, uint64(i))
		}
		if p.batch.Len() == 512 {
			p.task.Process(p.batch, false)
			p.task.AdvanceWatermark(p.prep.Time - 1000)
			p.task.TakeResults()
			stride := p.batch.Stride
			p.batch.Release()
			p.batch = stream.NewBatch(stride)
		}
	}
	for i := 0; i < 100_000; i++ { // warm up: every key and window seen
		run(i)
	}
	fired := p.task.Fired
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(100_000 + i)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "readings/s")
	if b.N > 100_000 && p.task.Fired == fired {
		b.Fatal("no window fired: the benchmark measures no firing")
	}
}

func TestPipeline_NoAllocsPerReading(t *testing.T) {
	p := newBenchPipeline(t)
	payload := []byte(`{"device":"sensor-7","ts":1700000000123,"temp":21.5,"humidity":40.2}`)
	for i := 0; i < 1000; i++ {
		p.prep.Prepare(payload, "t", 1, 0, math.MaxInt64/2, true)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if p.prep.Prepare(payload, "t", 1, 0, math.MaxInt64/2, true) != Pass {
			t.Fatal("reading did not pass")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per prepared reading, want 0", allocs)
	}
}
