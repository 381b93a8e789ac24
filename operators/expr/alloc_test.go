package expr

import (
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

// steadyRecord is a reading with every field the alloc tests and benchmarks
// read.
var steadyFields = fields{
	"temp": num(21.5), "device": str("dev-0042"), "site": str("plant-7"),
	"payload.sensor.temp": num(19.25), "status": str("OK"), "n": null, "level": str("42.5"),
}

// TestProgram_ZeroAllocs pins the rule that nothing on the per-reading
// path allocates (garbage per reading costs GC time at every rate): after
// one warm-up reading has grown rec.Scratch, evaluating again (with Scratch
// reset, as Record.Reset does) allocates nothing.
func TestProgram_ZeroAllocs(t *testing.T) {
	for _, src := range []string{
		`event.temp != null && event.temp < 200`,
		`event.device`,
		`event.temp * 9 / 5 + 32`,
		`event.device == "dev-0042"`,
		`event.status != event.device`,
		`"${event.site}-${event.device}"`,
		`"${event.site}/${upper(event.device)}/${event.temp}"`,
		`avg_input_is_just(event.payload.sensor.temp)`,
		`coalesce(event.n, event.temp) > 10 ? "hot" : "ok"`,
		`lower(event.status)`,
		`tostring(event.temp)`,
		`tonumber(event.level) + 1`,
		`len(event.device) + abs(-event.temp) + min(event.temp, 3) + pow(event.temp, 2)`,
		`contains(event.device, "004") || startswith(event.site, "x")`,
		`event.device * 2`, // runtime error path
	} {
		if src == `avg_input_is_just(event.payload.sensor.temp)` {
			src = `event.payload.sensor.temp` // what an aggregate argument compiles
		}
		t.Run(src, func(t *testing.T) {
			schema := event.NewSchema()
			p := mustCompile(t, src, schema)
			rec := newRecord(schema, steadyFields)
			key := make([]byte, 0, 64)
			run := func() {
				rec.Scratch = rec.Scratch[:0]
				_, _ = p.EvalErr(rec)
				_, _ = p.EvalBool(rec)
				key, _ = p.AppendKey(key[:0], rec)
			}
			run()
			if n := testing.AllocsPerRun(1000, run); n != 0 {
				t.Fatalf("%v allocs per reading, want 0", n)
			}
		})
	}
}

func benchmarkEval(b *testing.B, src string, eval func(p *Program, rec *event.Record)) {
	schema := event.NewSchema()
	p := mustCompile(b, src, schema)
	rec := newRecord(schema, steadyFields)
	b.ReportAllocs()
	for b.Loop() {
		rec.Scratch = rec.Scratch[:0]
		eval(p, rec)
	}
}

var sinkBool bool

func BenchmarkProgram_EvalBool_Filter(b *testing.B) {
	benchmarkEval(b, `event.temp != null && event.temp < 200`, func(p *Program, rec *event.Record) {
		sinkBool, _ = p.EvalBool(rec)
	})
}

func BenchmarkProgram_EvalBool_StringEquality(b *testing.B) {
	benchmarkEval(b, `event.device == "dev-0042"`, func(p *Program, rec *event.Record) {
		sinkBool, _ = p.EvalBool(rec)
	})
}

var sinkKey = make([]byte, 0, 64)

func BenchmarkProgram_AppendKey(b *testing.B) {
	benchmarkEval(b, `event.device`, func(p *Program, rec *event.Record) {
		sinkKey, _ = p.AppendKey(sinkKey[:0], rec)
	})
}

var sinkValue event.Value

func BenchmarkProgram_Eval_Arithmetic(b *testing.B) {
	benchmarkEval(b, `event.temp * 9 / 5 + 32`, func(p *Program, rec *event.Record) {
		sinkValue = p.Eval(rec)
	})
}

func BenchmarkProgram_Eval_Template(b *testing.B) {
	benchmarkEval(b, `"${event.site}-${event.device}"`, func(p *Program, rec *event.Record) {
		sinkValue = p.Eval(rec)
	})
}
