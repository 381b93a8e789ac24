package keyed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/state"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// harness runs a pipeline's EvalSpec over keyed Operators on any backends,
// routing readings by key group, and records every output and late
// reading as a line.
type harness struct {
	t        *testing.T
	spec     EvalSpec
	calls    []expr.KeyedCall
	opts     Options
	ops      []*Operator
	evs      []*Evaluator
	bes      []state.Backend
	out      []string
	late     []string
	wm       int64
	maxKG    int
	handlers []Handler
}

func newHarness(t *testing.T, order Order, ttl time.Duration, filter string, maps ...string) *harness {
	t.Helper()
	h := &harness{t: t, wm: math.MinInt64, maxKG: 128}
	schema := event.NewSchema()
	calls := &expr.KeyedCalls{}
	compile := func(src string) *expr.Program {
		e, diags := hclsyntax.ParseExpression([]byte(src), "test", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		p, diags := expr.CompileWith(e, schema, expr.Options{Keyed: calls})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return p
	}
	h.spec.Schema = schema
	if filter != "" {
		h.spec.Filter = compile(filter)
	}
	for _, m := range maps {
		name, src, _ := strings.Cut(m, "=")
		h.spec.Maps = append(h.spec.Maps, MapField{Name: name, Slot: schema.Slot(event.Path{name}), Prog: compile(src)})
	}
	h.spec.Decoder = decode.NewJSON(schema)
	h.calls = calls.Calls
	h.opts = Options{Order: order, TTL: ttl, Calls: calls.Calls}
	return h
}

// start builds one operator per backend.
func (h *harness) start(bes ...state.Backend) {
	h.ops, h.evs, h.bes, h.handlers = nil, nil, bes, nil
	for _, be := range bes {
		op, err := New(be, h.opts)
		if err != nil {
			h.t.Fatal(err)
		}
		ev := NewEvaluator(h.spec, op)
		h.ops = append(h.ops, op)
		h.evs = append(h.evs, ev)
		h.handlers = append(h.handlers, func(r *Reading) error {
			if ev.Eval(r) != Pass {
				return nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s %d %d", r.Key, r.Time, r.Seq)
			for _, m := range h.spec.Maps {
				b.WriteString(" " + m.Name + "=")
				b.Write(formatValue(ev.Rec.Fields[m.Slot]))
			}
			h.out = append(h.out, b.String())
			return nil
		})
	}
}

func (h *harness) reading(key string, t int64, seq uint64, payload string) {
	kg := state.KeyGroup([]byte(key), h.maxKG)
	i := state.Subtask(kg, len(h.ops), h.maxKG)
	r := Reading{Key: []byte(key), KeyGroup: kg, Time: t, Seq: seq, Payload: []byte(payload)}
	got, err := h.ops[i].Process(&r, h.wm, h.handlers[i])
	if err != nil {
		h.t.Fatal(err)
	}
	if got == Late {
		h.late = append(h.late, fmt.Sprintf("%s %d %d", key, t, seq))
	}
}

func (h *harness) watermark(wm int64) {
	h.wm = max(h.wm, wm)
	for i, op := range h.ops {
		if err := op.AdvanceWatermark(wm, h.handlers[i]); err != nil {
			h.t.Fatal(err)
		}
	}
}

// perKey groups lines by key, keeping their order.
func perKey(lines []string) map[string]string {
	m := map[string]string{}
	for _, l := range lines {
		k, _, _ := strings.Cut(l, " ")
		m[k] += l + "\n"
	}
	return m
}

type genReading struct {
	key     string
	t       int64
	payload string
}

// genInput is a random out-of-order stream: 20 keys, times advancing 10
// ms a reading with up to 300 ms of jitter, a small-valued field v (so it
// changes often but not always) and a counter c that sometimes resets.
func genInput(seed uint64, n int) []genReading {
	rng := rand.New(rand.NewPCG(seed, 1))
	counters := map[string]int{}
	out := make([]genReading, n)
	for i := range out {
		k := fmt.Sprintf("k%d", rng.IntN(20))
		counters[k] += rng.IntN(5)
		if rng.IntN(50) == 0 {
			counters[k] = 0
		}
		out[i] = genReading{k, int64(i*10 + rng.IntN(300)), fmt.Sprintf(`{"v":%d,"s":"%c","c":%d}`, rng.IntN(3), 'a'+rng.IntN(2), counters[k])}
	}
	return out
}

// feed replays in[from:to], with a watermark (max time − 200) every 50.
func (h *harness) feed(in []genReading, from, to int, maxT *int64) {
	for i := from; i < to; i++ {
		r := in[i]
		*maxT = max(*maxT, r.t)
		h.reading(r.key, r.t, uint64(i+1), r.payload)
		if (i+1)%50 == 0 {
			h.watermark(*maxT - 200)
		}
	}
}

// TestRestore_MidStreamMatchesUninterrupted checkpoints a bbolt-backed
// operator in the middle of an out-of-order stream (readings buffered, per-key
// state with strings, TTL), restores the snapshot into two subtasks, and
// checks that every key's outputs and the late readings equal those of an
// uninterrupted run on one subtask.
func TestRestore_MidStreamMatchesUninterrupted(t *testing.T) {
	maps := []string{"p=prev(event.s)", "c=changed(event.v)", "d=delta(event.c)", "s=since(event.v)", "f=first_seen()", "n=count_key()"}
	in := genInput(7, 3000)
	for _, order := range []Order{EventTime, Arrival} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			want := newHarness(t, order, 2*time.Second, "changed(event.v) || count_key() > 0", maps...)
			want.start(state.NewMemory())
			var maxT int64
			want.feed(in, 0, len(in), &maxT)
			want.watermark(math.MaxInt64)

			got := newHarness(t, order, 2*time.Second, "changed(event.v) || count_key() > 0", maps...)
			be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{CacheBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			got.start(be)
			maxT = 0
			got.feed(in, 0, 1500, &maxT)
			if n, _ := got.ops[0].Buffered(); order == EventTime && n == 0 {
				t.Fatal("nothing buffered at the checkpoint: the test would not cover the buffer")
			}
			if err := got.ops[0].Flush(); err != nil {
				t.Fatal(err)
			}
			snap, err := be.Snapshot(true)
			if err != nil {
				t.Fatal(err)
			}
			snap = got.ops[0].FilterSnapshot(snap)
			outAt, lateAt, maxTAt, wmAt := len(got.out), len(got.late), maxT, got.wm
			// Input after the snapshot is lost with the process, and its
			// outputs are of an epoch that never completed.
			got.feed(in, 1500, 1700, &maxT)
			got.out, got.late = got.out[:outAt], got.late[:lateAt]
			bes := []state.Backend{state.NewMemory(), state.NewMemory()}
			got.start(bes...)
			for i, m := range bes {
				kgs, _ := state.SubtaskKeyGroups(i, 2, 128)
				if err := m.Restore(snap.Entries, state.RestoreOptions{KeyGroups: &kgs}); err != nil {
					t.Fatal(err)
				}
				got.ops[i].SetWatermark(wmAt)
				// A barrier and a cleanup before the first reading: the
				// TTL clock is not known yet, so nothing may expire.
				s, err := m.Snapshot(true)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				if err := got.ops[i].FilterSnapshot(s).Entries(func(_, _, _ []byte, _ bool) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				s.Close()
				if n != m.Usage().Keys {
					t.Fatalf("a snapshot right after the restore holds %d of the %d entries", n, m.Usage().Keys)
				}
				if err := got.ops[i].Cleanup(1 << 20); err != nil {
					t.Fatal(err)
				}
			}
			snap.Close()
			got.wm, maxT = wmAt, maxTAt
			got.feed(in, 1500, len(in), &maxT)
			got.watermark(math.MaxInt64)
			if a, b := perKey(got.out), perKey(want.out); fmt.Sprint(a) != fmt.Sprint(b) {
				for k := range b {
					if a[k] != b[k] {
						t.Fatalf("key %s after restore:\n%s\nwant\n%s", k, a[k], b[k])
					}
				}
				t.Fatal("outputs differ")
			}
			if fmt.Sprint(got.late) != fmt.Sprint(want.late) {
				t.Fatalf("late readings differ:\n%v\nwant\n%v", got.late, want.late)
			}
		})
	}
}

// TestTTL_CleanupAndSnapshot checks the two cleanups of expired per-key
// state: FilterSnapshot leaves expired keys out of a checkpoint, and
// Cleanup deletes them from the working state.
func TestTTL_CleanupAndSnapshot(t *testing.T) {
	h := newHarness(t, EventTime, time.Second, "", "n=count_key()")
	be := state.NewMemory()
	h.start(be)
	for i := range 10 {
		h.reading(fmt.Sprintf("old%d", i), 100, uint64(i+1), `{}`)
	}
	h.reading("new", 5000, 11, `{}`) // the clock reaches 5000: the old keys expired at 1100
	h.watermark(math.MaxInt64)
	if len(h.out) != 11 {
		t.Fatalf("%d outputs, want 11", len(h.out))
	}
	functions := func(snap state.Snapshot) (n int) {
		err := snap.Entries(func(bucket, _, _ []byte, deleted bool) error {
			if string(bucket) == "keyed/functions" && !deleted {
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := h.ops[0].Flush(); err != nil { // a checkpoint barrier
		t.Fatal(err)
	}
	snap, err := be.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	if n := functions(snap); n != 11 {
		t.Fatalf("the raw snapshot holds %d keys' state, want 11", n)
	}
	if n := functions(h.ops[0].FilterSnapshot(snap)); n != 1 {
		t.Errorf("the filtered snapshot holds %d keys' state, want 1 (the live key)", n)
	}
	snap.Close()
	if err := h.ops[0].Cleanup(100); err != nil {
		t.Fatal(err)
	}
	if u := be.Usage(); u.Keys != 1 {
		t.Errorf("after Cleanup the state holds %d entries, want 1", u.Keys)
	}
}

// TestTimers_InterleavedAndRestored drives per-key logic of the kind an
// absence alarm needs: every reading moves its key's timer to 1 s after
// it. Timers fire when the watermark passes them, between the released
// readings in time order (a timer at t after the readings of time t), and
// survive a checkpoint and restore.
func TestTimers_InterleavedAndRestored(t *testing.T) {
	be := state.NewMemory()
	var events []string
	var op *Operator
	start := func(be state.Backend) {
		var err error
		if op, err = New(be, Options{Order: EventTime}); err != nil {
			t.Fatal(err)
		}
		op.OnTimer(func(_ uint16, key []byte, at int64) error {
			events = append(events, fmt.Sprintf("timer %s %d", key, at))
			return nil
		})
	}
	last := map[string]int64{}
	h := func(r *Reading) error {
		events = append(events, fmt.Sprintf("reading %s %d", r.Key, r.Time))
		if t0, ok := last[string(r.Key)]; ok {
			if err := op.DeleteTimer(t0 + 1000); err != nil {
				return err
			}
		}
		last[string(r.Key)] = r.Time
		return op.RegisterTimer(r.Time + 1000)
	}
	read := func(key string, at int64) {
		r := Reading{Key: []byte(key), KeyGroup: state.KeyGroup([]byte(key), 128), Time: at, Seq: uint64(at), Payload: []byte(`{}`)}
		if _, err := op.Process(&r, op.Watermark(), h); err != nil {
			t.Fatal(err)
		}
	}
	advance := func(wm int64, want ...string) {
		t.Helper()
		events = events[:0]
		if err := op.AdvanceWatermark(wm, h); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(events) != fmt.Sprint(want) {
			t.Fatalf("watermark %d: %q, want %q", wm, events, want)
		}
	}
	start(be)
	read("a", 1000)
	read("b", 1500)
	read("a", 1800) // a's timer moves from 2000 to 2800
	advance(2000, "reading a 1000", "reading b 1500", "reading a 1800")
	advance(2600, "timer b 2500")
	read("c", 2800)
	read("b", 2900)
	advance(3000, "reading c 2800", "timer a 2800", "reading b 2900")

	// Checkpoint; restore into a fresh backend: the timers of b (3900)
	// and c (3800) are in the state.
	if err := op.Flush(); err != nil {
		t.Fatal(err)
	}
	snap, err := be.Snapshot(true)
	if err != nil {
		t.Fatal(err)
	}
	restored := state.NewMemory()
	start(restored)
	if err := restored.Restore(snap.Entries, state.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	snap.Close()
	op.SetWatermark(3000)
	advance(math.MaxInt64, "timer c 3800", "timer b 3900")
}
