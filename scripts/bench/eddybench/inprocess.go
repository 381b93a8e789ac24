package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// shape is one pipeline of benchmark (a).
type shape struct {
	name     string
	assigner *window.Assigner // nil: no window (filter → key → pass-through output)
	// sessions: devices alternate between two sets of 1,000 every 30 s of
	// event time, so sessions end and fire instead of growing forever.
	sessions bool
}

func shapes() []shape {
	tumbling := window.Tumbling(60_000, 0, true)
	sliding := window.Sliding(60_000, 10_000, 0, true)
	session := window.Session(5_000, true)
	return []shape{
		{name: "filter (no window)"},
		{name: "tumbling 1m", assigner: &tumbling},
		{name: "sliding 1m/10s (6 windows per reading)", assigner: &sliding},
		{name: "session gap 5s", assigner: &session, sessions: true},
	}
}

// The input: JSON readings of 1,000 devices, one reading per millisecond of
// event time (each device every second), ts rewritten in place so event time
// keeps moving however long the run: windows open, fire and are purged as in
// production, instead of one window accumulating forever.
const (
	devices = 1000
	baseTs  = int64(1_700_000_000_000)
	tsWidth = 13 // digits of baseTs and of every ts the runs reach
)

type input struct {
	payloads [][]byte // per device (2 × devices for sessions)
	tsAt     []int    // offset of the ts digits in each payload
}

func newInput() *input {
	in := &input{}
	for d := 0; d < 2*devices; d++ {
		p := fmt.Appendf(nil, `{"device":"sensor-%04d","ts":%d,"temp":%.1f,"humidity":40.2,"meta":{"fw":"1.2.3","rssi":-70}}`,
			d, baseTs, 15+float64(d%200)/10)
		at := indexOf(p, []byte(`"ts":`)) + 5
		in.payloads = append(in.payloads, p)
		in.tsAt = append(in.tsAt, at)
	}
	return in
}

func indexOf(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}

// reading returns the i-th reading's payload, with its ts set in place.
func (in *input) reading(i int, sessions bool) ([]byte, int64) {
	d := i % devices
	ts := baseTs + int64(i)
	if sessions && (ts/30_000)%2 == 1 {
		d += devices
	}
	p := in.payloads[d]
	strconv.AppendInt(p[in.tsAt[d]:in.tsAt[d]], ts, 10) // fixed width: overwrites the old digits
	return p, ts
}

func mustCompile(src string, schema *event.Schema) *expr.Program {
	e, diags := hclsyntax.ParseExpression([]byte(src), "bench.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		panic(diags)
	}
	p, diags := expr.Compile(e, schema)
	if diags.HasErrors() {
		panic(diags)
	}
	return p
}

// pipeline is decode → timestamp → filter → key → batch → window subtask →
// output records, wired as the agent wires one subtask, without goroutines
// or channels (their cost is per batch of up to 512, not per reading).
type pipeline struct {
	in    *input
	shape shape
	prep  *operators.Preparer
	task  *operators.WindowTask
	batch *stream.Batch
	be    state.Backend
	store *window.StateStore // nil on the memory store
	out   int                // output records produced

	// checkpointEvery readings (0: never), the state is snapshotted as at a
	// checkpoint barrier: the window store flushed into bbolt, an
	// incremental snapshot taken and read through (the agent writes it to a
	// file in another goroutine; this process's CPU time counts it all).
	checkpointEvery int
	checkpoints     int
}

// newPipeline builds one; store is "memory" (window.MemoryStore) or "bbolt"
// (window.StateStore on state.Bolt with the default 32 MiB cache, as the
// agent runs it), under dir.
func newPipeline(sh shape, store, dir string) (*pipeline, error) {
	schema := event.NewSchema()
	spec := operators.PrepareSpec{Schema: schema, MaxKeyGroups: 128, Parallelism: 1}
	spec.Filter = mustCompile(`event.temp != null && event.temp < 200`, schema)
	spec.Key = mustCompile(`event.device`, schema)
	ts, err := decode.NewTimestamp(schema.Slot(event.Path{"ts"}), "ms", "")
	if err != nil {
		return nil, err
	}
	spec.Timestamp = ts
	spec.Decoder = decode.NewJSON(schema)
	funcs := []string{"count", "sum", "min", "max", "avg"}
	var op *window.Operator
	var be state.Backend
	var ss *window.StateStore
	if sh.assigner != nil {
		temp := mustCompile(`event.temp`, schema)
		spec.AggArgs = []*expr.Program{nil, temp, temp, temp, temp}
		var aggs []window.AggSpec
		for i, f := range funcs {
			fn, err := aggregate.ParseFunc(f)
			if err != nil {
				return nil, err
			}
			arg := i
			if f == "count" {
				arg = -1
			}
			aggs = append(aggs, window.AggSpec{Func: fn, Arg: arg})
		}
		var st window.Store = window.NewMemoryStore()
		if store == "bbolt" {
			b, err := state.OpenBolt(filepath.Join(dir, "state.db"), state.BoltOptions{})
			if err != nil {
				return nil, err
			}
			be = b
			if ss, err = window.NewStateStore(b, "window", []aggregate.Func{aggs[0].Func, aggs[1].Func, aggs[2].Func, aggs[3].Func, aggs[4].Func}); err != nil {
				return nil, err
			}
			st = ss
		}
		if op, err = window.NewOperator(window.Spec{Assigner: *sh.assigner, Aggs: aggs}, st); err != nil {
			return nil, err
		}
	} else {
		funcs = nil
	}
	return &pipeline{
		in: newInput(), shape: sh, prep: operators.NewPreparer(spec), be: be, store: ss,
		task:  operators.NewWindowTask("bench", "dev", funcs, op),
		batch: stream.NewBatch(len(spec.AggArgs)),
	}, nil
}

// step runs reading i; every 512 readings it closes the batch as the agent
// does: process, advance the watermark (1 s out-of-orderness), take output.
func (p *pipeline) step(i int) {
	pl, _ := p.in.reading(i, p.shape.sessions)
	if p.prep.Prepare(pl, "sensors/x/telemetry", uint64(i), 0, math.MaxInt64/2, true) == operators.Pass {
		p.batch.Append(p.prep.Key, p.prep.KeyGroup, p.prep.Time, p.prep.Values, pl, uint64(i))
	}
	if p.batch.Len() == 512 {
		p.task.Process(p.batch, false)
		p.task.AdvanceWatermark(p.prep.Time - 1000)
		if d := p.task.TakeResults(); d != nil {
			p.out += d.Len()
		}
		stride := p.batch.Stride
		p.batch.Release()
		p.batch = stream.NewBatch(stride)
	}
	if p.store != nil && p.checkpointEvery > 0 && i%p.checkpointEvery == 0 {
		p.checkpoint()
	}
}

func (p *pipeline) checkpoint() {
	if err := p.store.Flush(); err != nil {
		panic(err)
	}
	snap, err := p.be.Snapshot(false)
	if err != nil {
		panic(err)
	}
	n := 0
	if err := snap.Entries(func(_, k, v []byte, _ bool) error { n += len(k) + len(v); return nil }); err != nil {
		panic(err)
	}
	snap.Close()
	p.checkpoints++
}

func (p *pipeline) close() {
	if p.be != nil {
		p.be.Close()
	}
}

func runInProcess(args []string) error {
	fs := flag.NewFlagSet("inprocess", flag.ContinueOnError)
	stores := fs.String("stores", "memory,bbolt", "state stores to run: memory, bbolt or both")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of all runs to `file`")
	only := fs.String("only", "", "run only the pipelines whose name contains `text`")
	memProfile := fs.String("memprofile", "", "write an allocation profile (every allocation of the runs) to `file`")
	every := fs.Int("checkpoint-every", 1_000_000, "on bbolt, flush the window store and take an incremental snapshot every `n` readings, as a checkpoint barrier does (0: never); the agent checkpoints every 10 s by default, i.e. every 10M readings at 1M/s")
	if err := fs.Parse(args); err != nil {
		return err
	}
	runtime.GOMAXPROCS(1) // readings/s per core
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 1
		defer func() {
			f, err := os.Create(*memProfile)
			if err != nil {
				progress("inprocess: %v", err)
				return
			}
			defer f.Close()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				progress("inprocess: %v", err)
			}
		}()
	}
	t := newTable("pipeline", "state", "readings/CPU-s", "readings/s (wall)", "ns/reading", "allocs/reading", "B/reading", "outputs/reading", "checkpoints")
	for _, sh := range shapes() {
		if !strings.Contains(sh.name, *only) {
			continue
		}
		for _, store := range splitList(*stores) {
			if sh.assigner == nil && store == "bbolt" {
				continue // no state
			}
			dir, err := os.MkdirTemp("", "eddybench-")
			if err != nil {
				return err
			}
			p, err := newPipeline(sh, store, dir)
			if err != nil {
				return err
			}
			p.checkpointEvery = *every
			const warm = 200_000 // every key and its windows exist; firings under way
			for i := 0; i < warm; i++ {
				p.step(i)
			}
			next := warm
			p.out, p.checkpoints = 0, 0
			progress("inprocess: %s on %s", sh.name, store)
			// CPU time of the last round (the one r reports): on a shared
			// machine, wall time also counts time spent descheduled.
			var cpu time.Duration
			r := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					p.step(next)
					next++
				}
				cpu = processCPU() - cpu0
			})
			rate := float64(r.N) / r.T.Seconds()
			t.add(sh.name, store, si(float64(r.N)/cpu.Seconds()), si(rate), r.NsPerOp(), fmt.Sprintf("%.3f", float64(r.MemAllocs)/float64(r.N)),
				fmt.Sprintf("%.1f", float64(r.MemBytes)/float64(r.N)), fmt.Sprintf("%.3f", float64(p.out)/float64(next-warm)), p.checkpoints)
			p.close()
			os.RemoveAll(dir)
		}
	}
	fmt.Printf("\n(a) in-process pipelines, JSON input (~110 B), 1,000 devices, count/sum/min/max/avg, GOMAXPROCS=1, %s; readings/CPU-s = readings per second of process CPU time (user+system), the per-core figure; ns/reading is wall time; bbolt rows: a checkpoint (window store flushed, incremental snapshot read through) every %d readings, counted over all rounds\n\n", runtime.Version(), *every)
	t.write(os.Stdout)
	return nil
}

func splitList(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
