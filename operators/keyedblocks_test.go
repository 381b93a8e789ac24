package operators

import (
	"strings"
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

// blockTask returns a task without a window whose keyed stage has a map
// field s = event.s, in event-time order, with state_ttl ttl and its state
// in memory; set adds the
// block, with exprs compiled (before the decoder is built, as the agent
// does: the decoder reads the fields they name).
func blockTask(t *testing.T, ttl time.Duration, exprs []string, set func(k *KeyedStage, progs []*expr.Program) error) *WindowTask {
	t.Helper()
	return newBlockTask(t, state.NewMemory(), keyed.EventTime, ttl, exprs, set)
}

// blockTaskIn is blockTask in the given order.
func blockTaskIn(t *testing.T, order keyed.Order, ttl time.Duration, exprs []string, set func(k *KeyedStage, progs []*expr.Program) error) *WindowTask {
	t.Helper()
	return newBlockTask(t, state.NewMemory(), order, ttl, exprs, set)
}

// newBlockTask is blockTask with its state in be, in order.
func newBlockTask(t *testing.T, be state.Backend, order keyed.Order, ttl time.Duration, exprs []string, set func(k *KeyedStage, progs []*expr.Program) error) *WindowTask {
	t.Helper()
	schema := event.NewSchema()
	compile := func(src string) *expr.Program {
		e, _ := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		p, diags := expr.CompileWith(e, schema, expr.Options{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return p
	}
	s := compile("event.s")
	var progs []*expr.Program
	for _, src := range exprs {
		progs = append(progs, compile(src))
	}
	op, err := keyed.New(be, keyed.Options{Order: order, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	task := NewWindowTask("p", "dev", nil, nil)
	stage := NewKeyedStage(op, keyed.EvalSpec{Schema: schema, Decoder: decode.NewJSON(schema),
		Maps: []keyed.MapField{{Name: "s", Slot: schema.Slot(event.Path{"s"}), Prog: s}}})
	task.SetKeyed(stage)
	if err := set(stage, progs); err != nil {
		t.Fatal(err)
	}
	return task
}

// runToEnd processes b, then the end-of-input watermark, and returns the
// records.
func runToEnd(t *testing.T, task *WindowTask, b *stream.Batch) []string {
	t.Helper()
	task.Process(b, true)
	task.AdvanceWatermark(1 << 62)
	if err := task.Keyed().Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range task.TakeResults().Items() {
		got = append(got, string(it.Payload))
	}
	return got
}

// reportTask returns a task without a window running report_by_exception
// of value = event.v (deadband 1, heartbeat 10 s) with a map field s =
// event.s, in event-time order, with state_ttl ttl.
func reportTask(t *testing.T, ttl time.Duration) *WindowTask {
	return blockTask(t, ttl, []string{"event.v"}, func(k *KeyedStage, progs []*expr.Program) error {
		return k.SetReport(ReportSpec{Value: progs[0], Block: keyed.ReportByException{Deadband: 1, HeartbeatMs: 10_000, Time: keyed.EventTimeDomain}})
	})
}

// TestKeyedStage_ReportByException runs readings of two keys through
// report_by_exception and checks the records: the first reading of each
// key, changes of at least the deadband, the heartbeat, null as a value of
// its own; a string value is dead-lettered; ids count each key's reports.
func TestKeyedStage_ReportByException(t *testing.T) {
	task := reportTask(t, 0)
	b := stream.NewBatch(0)
	for i, r := range []struct {
		key     string
		ts      int64
		payload string
	}{
		{"a", 1000, `{"v":1,"s":"x"}`},    // first: reported
		{"b", 1000, `{"v":5,"s":"y"}`},    // first of b
		{"a", 2000, `{"v":1.5,"s":"x"}`},  // within the deadband
		{"a", 3000, `{"v":2,"s":"z"}`},    // moved 1: reported
		{"a", 4000, `{"v":null,"s":"x"}`}, // null after a number: reported
		{"a", 5000, `{"v":null,"s":"x"}`}, // null again: not
		{"a", 6000, `{"v":"hot","s":"x"}`},
		{"b", 11000, `{"v":5,"s":"y"}`}, // 10 s after b's report: heartbeat
		{"b", 12000, `{"v":5.5,"s":"y"}`},
	} {
		b.AppendWatermarked([]byte(r.key), 1, r.ts, nil, []byte(r.payload), uint64(i+1), 0)
	}
	got := runToEnd(t, task, b)
	want := []string{
		`{"id":"dev/p/a/report_by_exception/report/1000/0","pipeline":"p","key":"a","time":"1970-01-01T00:00:01.000Z","time_ms":1000,"kind":"report","value":1,"s":"x"}`,
		`{"id":"dev/p/b/report_by_exception/report/1000/0","pipeline":"p","key":"b","time":"1970-01-01T00:00:01.000Z","time_ms":1000,"kind":"report","value":5,"s":"y"}`,
		`{"id":"dev/p/a/report_by_exception/report/3000/1","pipeline":"p","key":"a","time":"1970-01-01T00:00:03.000Z","time_ms":3000,"kind":"report","value":2,"s":"z"}`,
		`{"id":"dev/p/a/report_by_exception/report/4000/2","pipeline":"p","key":"a","time":"1970-01-01T00:00:04.000Z","time_ms":4000,"kind":"report","value":null,"s":"x"}`,
		`{"id":"dev/p/b/report_by_exception/report/11000/1","pipeline":"p","key":"b","time":"1970-01-01T00:00:11.000Z","time_ms":11000,"kind":"report","value":5,"s":"y"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := task.TakeDead(); d == nil || d.Len() != 1 || task.Keyed().Rejected[keyed.ReasonWrongType] != 1 {
		t.Errorf("dead letters %v, wrong_type %d: want the string value's reading", d, task.Keyed().Rejected[keyed.ReasonWrongType])
	}
}

// TestKeyedStage_ReportByExceptionTTL checks that state_ttl applies to the
// block's state and counts from the key's last reading, reported or not:
// readings within the deadband keep the state alive; after a silence
// longer than the TTL the key starts afresh (its next reading is reported
// as a first one).
func TestKeyedStage_ReportByExceptionTTL(t *testing.T) {
	task := reportTask(t, 5*time.Second)
	b := stream.NewBatch(0)
	for i, ts := range []int64{1000, 4000, 7000, 9500, 20_000} { // v unchanged; 9500 < 7000 + 10 s heartbeat
		b.AppendWatermarked([]byte("a"), 1, ts, nil, []byte(`{"v":1,"s":"x"}`), uint64(i+1), 0)
	}
	var ids []string
	for _, p := range runToEnd(t, task, b) {
		ids = append(ids, p[len(`{"id":"`):strings.Index(p, `","pipeline"`)])
	}
	// 1000 is the first; 4000, 7000 and 9500 are within the deadband and
	// the heartbeat (and refresh the state every 3 s, under the 5 s TTL);
	// 20000 comes 10.5 s after the last reading: the state expired, so it
	// is the first report of a fresh state (seq 0), not a heartbeat (seq 1).
	want := "dev/p/a/report_by_exception/report/1000/0 dev/p/a/report_by_exception/report/20000/0"
	if strings.Join(ids, " ") != want {
		t.Errorf("reports %v, want %s", ids, want)
	}
}

// TestKeyedStage_Alarm runs readings through alarm "hot" (raise = v > 80,
// clear = v < 70, min_duration 5 s) and checks the records: a raise once
// the condition held 5 s, with the episode's start; a clear with start,
// end and duration; a non-boolean condition is dead-lettered.
func TestKeyedStage_Alarm(t *testing.T) {
	task := blockTask(t, 0, []string{"event.v > 80", "event.v < 70"}, func(k *KeyedStage, progs []*expr.Program) error {
		return k.SetAlarm(AlarmSpec{Name: "hot", Raise: progs[0], Clear: progs[1], Block: keyed.Alarm{MinDurationMs: 5000}})
	})
	b := stream.NewBatch(0)
	for i, r := range []struct {
		ts      int64
		payload string
	}{
		{1000, `{"v":85,"s":"a"}`},  // pending since 1000
		{3000, `{"v":75,"s":"b"}`},  // neither: the episode ends
		{4000, `{"v":90,"s":"c"}`},  // pending since 4000
		{8000, `{"v":91,"s":"d"}`},  // 4 s: still pending
		{9000, `{"v":92,"s":"e"}`},  // 5 s: raised, start 4000
		{10000, `{"v":99,"s":"f"}`}, // stays raised
		{12000, `{"v":60,"s":"g"}`}, // cleared
		{13000, `{"v":"x","s":"h"}`},
	} {
		b.AppendWatermarked([]byte("k"), 1, r.ts, nil, []byte(r.payload), uint64(i+1), 0)
	}
	got := runToEnd(t, task, b)
	want := []string{
		`{"id":"dev/p/k/hot/raised/9000/0","pipeline":"p","key":"k","time":"1970-01-01T00:00:09.000Z","time_ms":9000,"kind":"raised","start":"1970-01-01T00:00:04.000Z","start_ms":4000,"s":"e"}`,
		`{"id":"dev/p/k/hot/cleared/12000/1","pipeline":"p","key":"k","time":"1970-01-01T00:00:12.000Z","time_ms":12000,"kind":"cleared","start":"1970-01-01T00:00:04.000Z","start_ms":4000,"end":"1970-01-01T00:00:12.000Z","end_ms":12000,"duration_ms":8000,"s":"g"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := task.TakeDead(); d == nil || d.Len() != 1 || task.Keyed().Rejected[keyed.ReasonWrongType] != 1 {
		t.Errorf("dead letters %v, wrong_type %d: want the reading whose condition is not a bool", d, task.Keyed().Rejected[keyed.ReasonWrongType])
	}
}

// TestKeyedStage_Dedup drops repeats of an id within 5 s after the filter
// and before the map (a dropped repeat does not extend the window), counts
// them, passes readings without an id, and keeps ids per key.
func TestKeyedStage_Dedup(t *testing.T) {
	task := blockTask(t, 0, []string{"event.id"}, func(k *KeyedStage, progs []*expr.Program) error {
		return k.SetDedup(progs[0], keyed.Dedup{WithinMs: 5000, Time: keyed.EventTimeDomain})
	})
	b := stream.NewBatch(0)
	for i, r := range []struct {
		key     string
		ts      int64
		payload string
	}{
		{"a", 1000, `{"id":"m1","s":"1"}`}, // passes
		{"b", 1000, `{"id":"m1","s":"2"}`}, // another key: passes
		{"a", 3000, `{"id":"m1","s":"3"}`}, // repeat: dropped
		{"a", 4000, `{"id":7,"s":"4"}`},    // a number id: passes
		{"a", 5000, `{"s":"5"}`},           // no id: passes
		{"a", 5500, `{"s":"6"}`},           // no id: passes
		{"a", 5900, `{"id":"m1","s":"7"}`}, // 4.9 s after the first: dropped
		{"a", 6000, `{"id":"m1","s":"8"}`}, // 5 s after the first: passes
	} {
		b.AppendWatermarked([]byte(r.key), 1, r.ts, nil, []byte(r.payload), uint64(i+1), 0)
	}
	var got []string
	for _, p := range runToEnd(t, task, b) {
		got = append(got, p[strings.Index(p, `"s":`):len(p)-1])
	}
	if want := `"s":"1" "s":"2" "s":"4" "s":"5" "s":"6" "s":"8"`; strings.Join(got, " ") != want {
		t.Errorf("passed %s, want %s", strings.Join(got, " "), want)
	}
	if n := task.Keyed().Duplicates; n != 2 {
		t.Errorf("%d duplicates counted, want 2", n)
	}
}

// TestKeyedStage_Absence runs two keys through absence (timeout 5 s) on
// event-time timers: a key quiet past its deadline is silent at the
// deadline (found when the watermark passes it, between the readings), and
// resumed by its next reading; the end-of-input watermark makes every key
// silent. Silent records have no reading: their map fields are null.
func TestKeyedStage_Absence(t *testing.T) {
	task := blockTask(t, 0, nil, func(k *KeyedStage, _ []*expr.Program) error {
		return k.SetAbsence(AbsenceSpec{Block: keyed.Absence{TimeoutMs: 5000, Time: keyed.EventTimeDomain}})
	})
	b := stream.NewBatch(0)
	for i, r := range []struct {
		key string
		ts  int64
	}{{"a", 1000}, {"b", 1000}, {"b", 4000}, {"b", 8000}, {"a", 9000}} {
		b.AppendWatermarked([]byte(r.key), 1, r.ts, nil, []byte(`{"s":"`+r.key+`"}`), uint64(i+1), 0)
	}
	got := runToEnd(t, task, b)
	want := []string{
		`{"id":"dev/p/a/absence/silent/6000/0","pipeline":"p","key":"a","time":"1970-01-01T00:00:06.000Z","time_ms":6000,"kind":"silent","start":"1970-01-01T00:00:01.000Z","start_ms":1000,"s":null}`,
		`{"id":"dev/p/a/absence/resumed/9000/1","pipeline":"p","key":"a","time":"1970-01-01T00:00:09.000Z","time_ms":9000,"kind":"resumed","start":"1970-01-01T00:00:01.000Z","start_ms":1000,"end":"1970-01-01T00:00:09.000Z","end_ms":9000,"duration_ms":8000,"s":"a"}`,
		`{"id":"dev/p/b/absence/silent/13000/0","pipeline":"p","key":"b","time":"1970-01-01T00:00:13.000Z","time_ms":13000,"kind":"silent","start":"1970-01-01T00:00:08.000Z","start_ms":8000,"s":null}`,
		`{"id":"dev/p/a/absence/silent/14000/2","pipeline":"p","key":"a","time":"1970-01-01T00:00:14.000Z","time_ms":14000,"kind":"silent","start":"1970-01-01T00:00:09.000Z","start_ms":9000,"s":null}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
