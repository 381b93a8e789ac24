package operators

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
)

// controlStep is one input of a keyed pipeline with a control stream: a
// control message (ctl set) or a reading of key "k" at ts.
type controlStep struct {
	ctl     string
	ts      int64
	payload string
}

// controlScript has readings buffered out of order around control
// changes: the one at 8000 (v 45) arrives under limit 50 and is released,
// in event-time order, after the limit went down to 40, which it exceeds.
var controlScript = []controlStep{
	{ts: 6000, payload: `{"v":100,"s":"z"}`}, // before any control message: limit null
	{ctl: `{"limit":50}`},
	{ts: 10000, payload: `{"v":60,"s":"a"}`}, // 60 > 50
	{ts: 8000, payload: `{"v":45,"s":"b"}`},  // 45 > 50 is false, though 45 > 40
	{ctl: `{"limit":40}`},
	{ts: 9000, payload: `{"v":45,"s":"c"}`}, // 45 > 40
	{ts: 7000, payload: `{"v":55,"s":"d"}`}, // 55 > 40
	{ctl: `{"limit":null}`},                 // deletes it: later readings see null
	{ts: 11000, payload: `{"v":30,"s":"e"}`},
}

// controlPipeline prepares script as a keyed pipeline's prepare stage
// does (control messages applied between readings, each reading's values
// captured) into one batch, its watermark 5 s behind the latest reading,
// and runs it through a keyed stage with map s = event.s whose filter
// (filter non-empty) or alarm (raise non-empty) reads control.*. be holds
// the keyed state; flushAt > 0 flushes it and restores a snapshot of it
// into a fresh stage after that many readings, as a restart would.
func controlPipeline(t *testing.T, order keyed.Order, filter, raise string, script []controlStep, flushAt int) []string {
	t.Helper()
	schema := event.NewSchema()
	st := control.New()
	var paths expr.ControlPaths
	compile := func(src string, opts expr.Options) *expr.Program {
		e, _ := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		p, diags := expr.CompileWith(e, schema, opts)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return p
	}
	capture := expr.Options{ControlCapture: &paths}
	spec := keyed.EvalSpec{Schema: schema, Control: &paths,
		Maps: []keyed.MapField{{Name: "s", Slot: schema.Slot(event.Path{"s"}), Prog: compile("event.s", capture)}}}
	if filter != "" {
		spec.Filter = compile(filter, capture)
	}
	var raiseProg *expr.Program
	if raise != "" {
		raiseProg = compile(raise, capture)
	}
	key := compile("event.d", expr.Options{Control: st}) // before the decoders: they read the fields named
	ts, err := decode.NewTimestamp(schema.Slot(event.Path{"ts"}), "ms", "")
	if err != nil {
		t.Fatal(err)
	}
	prep := NewPreparer(PrepareSpec{Schema: schema, Decoder: decode.NewJSON(schema), Timestamp: ts,
		Key: key, Capture: &paths, ControlState: st})
	spec.Decoder = decode.NewJSON(schema)

	newTask := func(be state.Backend) *WindowTask {
		op, err := keyed.New(be, keyed.Options{Order: order, Control: true})
		if err != nil {
			t.Fatal(err)
		}
		task := NewWindowTask("p", "dev", nil, nil)
		stage := NewKeyedStage(op, spec)
		task.SetKeyed(stage)
		if raiseProg != nil {
			if err := stage.SetAlarm(AlarmSpec{Name: "hot", Raise: raiseProg, Block: keyed.Alarm{}}); err != nil {
				t.Fatal(err)
			}
		}
		return task
	}
	be := state.NewMemory()
	task := newTask(be)
	var got []string
	take := func() {
		if err := task.Keyed().Err(); err != nil {
			t.Fatal(err)
		}
		if d := task.TakeResults(); d != nil {
			for _, it := range d.Items() {
				got = append(got, string(it.Payload))
			}
		}
	}
	b := stream.NewBatch(0)
	wm, maxTs, readings := int64(-1<<62), int64(-1<<62), 0
	for i, s := range script {
		if s.ctl != "" {
			if err := st.Apply([]byte(s.ctl)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		payload := strings.Replace(s.payload, "{", `{"d":"k","ts":`+itoa(s.ts)+",", 1)
		if out := prep.Prepare([]byte(payload), "t", uint64(i+1), 0, 0, false); out != Pass {
			t.Fatalf("step %d: outcome %d (%+v)", i, out, prep.Reject)
		}
		b.AppendWatermarked(prep.Key, prep.KeyGroup, prep.Time, nil, []byte(payload), uint64(i+1), wm)
		b.AppendControl(prep.Control)
		maxTs = max(maxTs, prep.Time)
		wm = maxTs - 5000
		readings++
		if readings == flushAt {
			task.Process(b, true)
			b.Release()
			b = stream.NewBatch(0)
			take()
			if err := task.Keyed().Flush(); err != nil {
				t.Fatal(err)
			}
			snap, err := be.Snapshot(true)
			if err != nil {
				t.Fatal(err)
			}
			be = state.NewMemory()
			task = newTask(be)
			if err := be.Restore(snap.Entries, state.RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			snap.Close()
		}
	}
	task.Process(b, true)
	task.AdvanceWatermark(1 << 62)
	take()
	return got
}

func itoa(n int64) string { return string(event.NumberValue(float64(n)).AppendText(nil)) }

// TestKeyedStage_ControlCapturedAtArrival checks that per-key expressions
// read the control values in force when each reading arrived, not when
// the event-time buffer releases it: the reading at 8000 arrived under
// limit 50 and stays filtered though it is released after the limit went
// to 40; a reading before any control message, or after the value was
// deleted, sees null (the filter drops it, the alarm does not raise). The
// same holds with the buffer checkpointed and restored in between (the
// captured values are kept with the buffered readings), and in arrival
// order.
func TestKeyedStage_ControlCapturedAtArrival(t *testing.T) {
	reading := func(ts int64, s string) string {
		return `{"id":"dev/p/k/` + itoa(ts) + `/` + map[string]string{"a": "3", "c": "6", "d": "7"}[s] + `","pipeline":"p","key":"k","time":"1970-01-01T00:00:` +
			map[int64]string{7000: "07", 9000: "09", 10000: "10"}[ts] + `.000Z","time_ms":` + itoa(ts) + `,"kind":"reading","s":"` + s + `"}`
	}
	filterWant := []string{reading(7000, "d"), reading(9000, "c"), reading(10000, "a")}
	for _, c := range []struct {
		name    string
		order   keyed.Order
		filter  string
		raise   string
		flushAt int
		want    []string
	}{
		{name: "filter, event time", order: keyed.EventTime, filter: "event.v > control.limit", want: filterWant},
		// Restored after the reading at 8000: it and those at 9000 and
		// 10000 come back from the snapshot with their captured values.
		{name: "filter, restored from a checkpoint", order: keyed.EventTime, filter: "event.v > control.limit", flushAt: 4, want: filterWant},
		{name: "filter, arrival order", order: keyed.Arrival, filter: "event.v > control.limit",
			want: []string{reading(10000, "a"), reading(9000, "c"), reading(7000, "d")}},
		// The alarm sees d (raised), b (cleared: 45 > 50 is false), c
		// (raised), a (stays), e (null after the deletion: cleared).
		{name: "alarm, event time", order: keyed.EventTime, raise: "event.v > control.limit", want: []string{
			`{"id":"dev/p/k/hot/raised/7000/0","pipeline":"p","key":"k","time":"1970-01-01T00:00:07.000Z","time_ms":7000,"kind":"raised","start":"1970-01-01T00:00:07.000Z","start_ms":7000,"s":"d"}`,
			`{"id":"dev/p/k/hot/cleared/8000/1","pipeline":"p","key":"k","time":"1970-01-01T00:00:08.000Z","time_ms":8000,"kind":"cleared","start":"1970-01-01T00:00:07.000Z","start_ms":7000,"end":"1970-01-01T00:00:08.000Z","end_ms":8000,"duration_ms":1000,"s":"b"}`,
			`{"id":"dev/p/k/hot/raised/9000/2","pipeline":"p","key":"k","time":"1970-01-01T00:00:09.000Z","time_ms":9000,"kind":"raised","start":"1970-01-01T00:00:09.000Z","start_ms":9000,"s":"c"}`,
			`{"id":"dev/p/k/hot/cleared/11000/3","pipeline":"p","key":"k","time":"1970-01-01T00:00:11.000Z","time_ms":11000,"kind":"cleared","start":"1970-01-01T00:00:09.000Z","start_ms":9000,"end":"1970-01-01T00:00:11.000Z","end_ms":11000,"duration_ms":2000,"s":"e"}`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := controlPipeline(t, c.order, c.filter, c.raise, controlScript, c.flushAt)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
