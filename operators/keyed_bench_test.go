package operators

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
)

// keyedBench is the keyed subtask of `filter = changed(event.state)`, or
// of `report_by_exception { value = event.temp deadband = 0.5 heartbeat =
// "10m" }`, without a window, as the agent wires it: batches of 512 readings in,
// reading records out, state in bbolt with an incremental
// checkpoint every 1,000,000 readings (as scripts/bench/inprocess.sh: the
// agent's 10 s interval at 100k readings/s), its entries read as a
// checkpoint writer reads them. The caches are the agent's split of the
// default 32 MiB state { cache } for a subtask with per-key functions and
// no window (agent/memory.go stateShare): 28 MiB of decoded per-key states,
// 4 MiB of bbolt write-back cache.
type keyedBench struct {
	task     *WindowTask
	be       state.Backend
	batch    *stream.Batch
	payloads [][]byte
	keys     [][]byte
	kgs      []uint16
	flips    []bool // the reading of that slot changes its key's state
	rng      *rand.Rand
	order    keyed.Order
	maxT     int64
	snapped  int64
}

func newKeyedBench(b *testing.B, keys int, order keyed.Order, report bool) *keyedBench {
	schema := event.NewSchema()
	calls := &expr.KeyedCalls{}
	compile := func(src string) *expr.Program {
		e, _ := hclsyntax.ParseExpression([]byte(src), "bench.hcl", hcl.InitialPos)
		p, diags := expr.CompileWith(e, schema, expr.Options{Keyed: calls})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		return p
	}
	var filter, value *expr.Program
	if report {
		value = compile(`event.temp`)
	} else {
		filter = compile(`changed(event.state)`)
	}
	be, err := state.OpenBolt(filepath.Join(b.TempDir(), "state.db"), state.BoltOptions{CacheBytes: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	op, err := keyed.New(be, keyed.Options{Order: order, Calls: calls.Calls, CacheBytes: 28 << 20})
	if err != nil {
		b.Fatal(err)
	}
	task := NewWindowTask("bench", "dev", nil, nil)
	stage := NewKeyedStage(op, keyed.EvalSpec{Schema: schema, Decoder: decode.NewJSON(schema), Filter: filter})
	task.SetKeyed(stage)
	if report {
		err := stage.SetReport(ReportSpec{Value: value, Block: keyed.ReportByException{Deadband: 0.5, HeartbeatMs: 600_000, Time: keyed.EventTimeDomain}})
		if err != nil {
			b.Fatal(err)
		}
	}
	kb := &keyedBench{task: task, be: be, batch: stream.NewBatch(0), rng: rand.New(rand.NewPCG(1, 2)), order: order}
	for i := range keys {
		k := fmt.Appendf(nil, "sensor-%06d", i)
		kb.keys = append(kb.keys, k)
		kb.kgs = append(kb.kgs, state.KeyGroup(k, state.DefaultMaxKeyGroups))
	}
	// Two payloads per key (state on at 21.5 °C, off at 22.5 °C); a reading
	// flips its key's state with probability 1/10, so the filter passes,
	// and report_by_exception reports, a tenth.
	for j, s := range []string{"on", "off"} {
		for i := range keys {
			kb.payloads = append(kb.payloads, fmt.Appendf(nil, `{"device":"sensor-%06d","ts":1700000000000,"state":%q,"temp":%.1f}`, i, s, 21.5+float64(j)))
		}
	}
	kb.flips = make([]bool, keys)
	return kb
}

// run feeds reading i: key i mod keys, time 1 ms per reading with up to
// 50 ms of jitter; with EventTime order the watermark (max time − 100 ms)
// follows every batch, so about 150 readings wait in the buffer.
func (kb *keyedBench) run(b *testing.B, i int) {
	n := len(kb.keys)
	k := i % n
	if kb.rng.IntN(10) == 0 {
		kb.flips[k] = !kb.flips[k]
	}
	p := kb.payloads[k]
	if kb.flips[k] {
		p = kb.payloads[n+k]
	}
	t := 1_700_000_000_000 + int64(i) + kb.rng.Int64N(50)
	kb.maxT = max(kb.maxT, t)
	kb.batch.Append(kb.keys[k], kb.kgs[k], t, nil, p, uint64(i))
	if kb.batch.Len() < 512 {
		return
	}
	kb.task.Process(kb.batch, false)
	kb.batch.Release()
	kb.batch = stream.NewBatch(0)
	if kb.order == keyed.EventTime {
		kb.task.AdvanceWatermark(kb.maxT - 100)
	}
	kb.task.TakeResults()
	if int64(i)-kb.snapped >= 1_000_000 {
		kb.snapped = int64(i)
		if err := kb.task.Keyed().Flush(); err != nil {
			b.Fatal(err)
		}
		snap, err := kb.be.Snapshot(false)
		if err != nil {
			b.Fatal(err)
		}
		snap = kb.task.Keyed().FilterSnapshot(snap)
		var size int
		if err := snap.Entries(func(bucket, key, value []byte, _ bool) error { size += len(key) + len(value); return nil }); err != nil {
			b.Fatal(err)
		}
		snap.Close()
	}
	if err := kb.task.Keyed().Err(); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time (user and system) the process has used: on a
// machine other jobs load, readings per CPU-second is the figure that
// stays comparable; it includes the garbage collector's.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKeyed_ChangedFilter measures the keyed subtask of a changed()
// filter per reading on one core: decode of the reading, the per-key state
// read and written in bbolt, the filter, a record for the tenth that
// passes, incremental checkpoints; with event-time order also the ordering
// buffer (each reading put into and taken out of the state). Report:
// readings/s (wall) and readings/cpu-s.
func BenchmarkKeyed_ChangedFilter(b *testing.B) { benchKeyed(b, false) }

// BenchmarkKeyed_ReportByException is BenchmarkKeyed_ChangedFilter for a
// report_by_exception pipeline: its block state read and written per
// reading instead of the per-key function state, a record per report.
func BenchmarkKeyed_ReportByException(b *testing.B) { benchKeyed(b, true) }

func benchKeyed(b *testing.B, report bool) {
	for _, keys := range []int{1_000, 100_000} {
		for _, order := range []keyed.Order{keyed.Arrival, keyed.EventTime} {
			name := map[keyed.Order]string{keyed.Arrival: "arrival", keyed.EventTime: "event_time"}[order]
			b.Run(fmt.Sprintf("keys=%d/order=%s", keys, name), func(b *testing.B) {
				kb := newKeyedBench(b, keys, order, report)
				for i := range 3 * keys { // warm up: every key has state
					kb.run(b, i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime(b)
				for i := 0; i < b.N; i++ {
					kb.run(b, 3*keys+i)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "readings/s")
				b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "readings/cpu-s")
			})
		}
	}
}

// TestKeyed_ChangedFilterNoAllocs checks that the keyed subtask of a
// changed() filter allocates nothing per reading once warm, in arrival
// order (event-time order adds the buffer's Scan per batch).
func TestKeyed_ChangedFilterNoAllocs(t *testing.T) {
	schema := event.NewSchema()
	calls := &expr.KeyedCalls{}
	e, _ := hclsyntax.ParseExpression([]byte(`changed(event.state)`), "t.hcl", hcl.InitialPos)
	filter, _ := expr.CompileWith(e, schema, expr.Options{Keyed: calls})
	be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	op, err := keyed.New(be, keyed.Options{Order: keyed.Arrival, Calls: calls.Calls})
	if err != nil {
		t.Fatal(err)
	}
	task := NewWindowTask("t", "dev", nil, nil)
	task.SetKeyed(NewKeyedStage(op, keyed.EvalSpec{Schema: schema, Decoder: decode.NewJSON(schema), Filter: filter}))
	batch := stream.NewBatch(0)
	on := []byte(`{"state":"on"}`)
	for i := range 64 {
		batch.Append(strconv.AppendInt(nil, int64(i), 10), uint16(i), int64(i), nil, on, uint64(i))
	}
	task.Process(batch, false)
	task.TakeResults()
	allocs := testing.AllocsPerRun(100, func() {
		// Same payload: the filter drops every reading; no record is made.
		task.Process(batch, false)
	})
	if per := allocs / 64; per > 0 {
		t.Fatalf("%.2f allocations per reading, want 0", per)
	}
}
