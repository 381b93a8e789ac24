package operators

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
)

// procStep is one step of a processing-time block scenario: the fake
// clock is set to clock, then one of: a reading of key (event time ts, or
// clock when 0; value v for report_by_exception), a checkpoint and a
// restore into a fresh task (the agent was down until clock; nothing runs
// until the next step), or a tick (AdvanceProcessingTime, as the subtask's
// ticker does). want lists the records the step produced, summarised.
type procStep struct {
	clock   int64
	key     string
	ts      int64
	v       string
	restore bool
	want    []string
}

// tick is a step that only moves the clock on.
func tick(clock int64, want ...string) procStep { return procStep{clock: clock, want: want} }

// read is a step with a reading of key at clock.
func read(clock int64, key string, want ...string) procStep {
	return procStep{clock: clock, key: key, want: want}
}

// procSummary summarises a record: id, time, and start/end/value when set.
func procSummary(t *testing.T, rec []byte) string {
	t.Helper()
	var r struct {
		ID      string   `json:"id"`
		TimeMs  int64    `json:"time_ms"`
		StartMs *int64   `json:"start_ms"`
		EndMs   *int64   `json:"end_ms"`
		Value   *float64 `json:"value"`
	}
	if err := json.Unmarshal(rec, &r); err != nil {
		t.Fatalf("%s: %v", rec, err)
	}
	s := fmt.Sprintf("%s t=%d", r.ID, r.TimeMs)
	if r.StartMs != nil {
		s += fmt.Sprintf(" start=%d", *r.StartMs)
	}
	if r.EndMs != nil {
		s += fmt.Sprintf(" end=%d", *r.EndMs)
	}
	if r.Value != nil {
		s += fmt.Sprintf(" v=%g", *r.Value)
	}
	return s
}

// runProcSteps runs steps through a task without a window, in arrival
// order, built by set on processing time, checking each step's records:
// a reading arrives at its step's clock (Batch.Arrivals), and a step
// without one moves processing time there.
func runProcSteps(t *testing.T, ttl time.Duration, exprs []string, set func(k *KeyedStage, progs []*expr.Program) error, steps []procStep) {
	t.Helper()
	be := state.NewMemory()
	build := func(be state.Backend) *WindowTask {
		task := newBlockTask(t, be, keyed.Arrival, ttl, exprs, set)
		task.Keyed().SetProcessingTime()
		return task
	}
	task := build(be)
	offset := uint64(0)
	for i, s := range steps {
		switch {
		case s.restore:
			if err := task.Keyed().Flush(); err != nil { // as a checkpoint does
				t.Fatal(err)
			}
			snap, err := be.Snapshot(true)
			if err != nil {
				t.Fatal(err)
			}
			be = state.NewMemory()
			task = build(be)
			if err := be.Restore(snap.Entries, state.RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			snap.Close()
		case s.key != "":
			offset++
			ts := s.ts
			if ts == 0 {
				ts = s.clock
			}
			v := s.v
			if v == "" {
				v = "1"
			}
			b := stream.NewBatch(0)
			b.Append([]byte(s.key), 1, ts, nil, []byte(`{"s":"`+s.key+`","v":`+v+`}`), offset)
			b.AppendArrival(s.clock)
			task.Process(b, false)
		default:
			task.AdvanceProcessingTime(s.clock)
		}
		if err := task.Keyed().Err(); err != nil {
			t.Fatal(err)
		}
		var got []string
		if d := task.TakeResults(); d != nil {
			for _, it := range d.Items() {
				got = append(got, procSummary(t, it.Payload))
			}
		}
		if strings.Join(got, "\n") != strings.Join(s.want, "\n") {
			t.Fatalf("step %d (clock %d): records\n%s\nwant\n%s", i, s.clock, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
}

// TestKeyedStage_AbsenceProcessingTime runs absence (timeout 5 s) on
// processing time with a fake clock: a key's deadline is its last
// reading's arrival + 5 s on the clock, whatever the readings' event
// times; silent fires once per silence and resumed ends it; timers are
// checkpointed, and those whose time passed while the agent was down
// fire at once after the restore, before the next reading; state_ttl
// (counted on the readings' times) drops a key's state, and its timer
// then finds nothing. Ids name the key's last reading before the silence
// (o<offset>), so a replay producing the same transition gives the same
// id.
func TestKeyedStage_AbsenceProcessingTime(t *testing.T) {
	absence := func(k *KeyedStage, _ []*expr.Program) error {
		return k.SetAbsence(AbsenceSpec{Block: keyed.Absence{TimeoutMs: 5000, Time: keyed.ProcessingTimeDomain}})
	}
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		steps []procStep
	}{
		{"silence and resume", 0, []procStep{
			read(1000, "a"),
			tick(5999),
			tick(6000, "dev/p/a/absence/silent/o1/0 t=6000 start=1000"),
			tick(8000), // once per silence
			read(9000, "a", "dev/p/a/absence/resumed/o1/0 t=9000 start=1000 end=9000"),
			tick(14000, "dev/p/a/absence/silent/o2/0 t=14000 start=9000"),
		}},
		{"readings move the deadline on", 0, []procStep{
			read(1000, "a"),
			read(4000, "a"),
			tick(6000), // the first deadline passed: too early now
			read(8000, "a"),
			tick(12999),
			tick(13000, "dev/p/a/absence/silent/o3/0 t=13000 start=8000"),
		}},
		{"event time does not count", 0, []procStep{
			{clock: 1000, key: "a", ts: 1_700_000_000_000},
			{clock: 2000, key: "b", ts: 1_900_000_000_000}, // far ahead: no silence for a
			tick(6000, "dev/p/a/absence/silent/o1/0 t=6000 start=1000"),
			tick(7000, "dev/p/b/absence/silent/o2/0 t=7000 start=2000"),
		}},
		{"repeated silences", 0, []procStep{
			read(1000, "a"),
			tick(6500, "dev/p/a/absence/silent/o1/0 t=6000 start=1000"),
			read(7000, "a", "dev/p/a/absence/resumed/o1/0 t=7000 start=1000 end=7000"),
			read(8000, "b"),
			tick(13000, "dev/p/a/absence/silent/o2/0 t=12000 start=7000", "dev/p/b/absence/silent/o3/0 t=13000 start=8000"),
			read(20000, "a", "dev/p/a/absence/resumed/o2/0 t=20000 start=7000 end=20000"),
			tick(30000, "dev/p/a/absence/silent/o4/0 t=25000 start=20000"),
		}},
		{"a reading past the deadline before the timer fired", 0, []procStep{
			read(1000, "a"),
			// The batch fires the due timer first.
			read(7000, "a", "dev/p/a/absence/silent/o1/0 t=6000 start=1000", "dev/p/a/absence/resumed/o1/0 t=7000 start=1000 end=7000"),
		}},
		{"restore with overdue timers", 0, []procStep{
			read(1000, "a"),
			read(2000, "b"),
			read(3000, "a"),
			{clock: 60_000, restore: true},
			// The first batch after the restore fires them, in deadline
			// order, before its reading (a's timer at 6000, kept when its
			// second reading came, moves to 8000 when it fires).
			read(60_000, "b", "dev/p/b/absence/silent/o2/0 t=7000 start=2000",
				"dev/p/a/absence/silent/o3/0 t=8000 start=3000",
				"dev/p/b/absence/resumed/o2/0 t=60000 start=2000 end=60000"),
			tick(65_000, "dev/p/b/absence/silent/o4/0 t=65000 start=60000"),
		}},
		{"restore with a timer not yet due", 0, []procStep{
			read(1000, "a"),
			{clock: 3000, restore: true},
			tick(5999),
			tick(6000, "dev/p/a/absence/silent/o1/0 t=6000 start=1000"),
		}},
		{"state_ttl drops a silent key's state", 10 * time.Second, []procStep{
			read(1000, "a"),
			tick(6000, "dev/p/a/absence/silent/o1/0 t=6000 start=1000"),
			read(12_000, "b"), // the TTL clock passes 1000 + 10 s
			read(13_000, "a"), // a starts afresh: no resumed
			tick(18_000, "dev/p/b/absence/silent/o2/0 t=17000 start=12000", "dev/p/a/absence/silent/o3/0 t=18000 start=13000"),
		}},
		{"the timer of an expired key finds nothing", 10 * time.Second, []procStep{
			read(1000, "a"),
			{clock: 2000, key: "b", ts: 20_000}, // a's state expires on the TTL clock
			tick(6000),
			tick(7000, "dev/p/b/absence/silent/o2/0 t=7000 start=2000"),
		}},
		{"end of input makes every heard key silent", 0, []procStep{
			read(1000, "a"),
			read(2000, "b"),
			tick(math.MaxInt64, "dev/p/a/absence/silent/o1/0 t=6000 start=1000", "dev/p/b/absence/silent/o2/0 t=7000 start=2000"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runProcSteps(t, tc.ttl, nil, absence, tc.steps) })
	}
}

// TestKeyedStage_ReportHeartbeatProcessingTime runs report_by_exception
// (deadband 1, heartbeat 10 s) on processing time with a fake clock: when
// nothing was reported for 10 s of the clock, a heartbeat record repeats
// the last value (at the due time), numbered from the report it repeats;
// a report restarts the count; a heartbeat overdue after a restore is sent
// once, not once per heartbeat missed; the end of input sends one.
func TestKeyedStage_ReportHeartbeatProcessingTime(t *testing.T) {
	report := func(k *KeyedStage, progs []*expr.Program) error {
		return k.SetReport(ReportSpec{Value: progs[0], Block: keyed.ReportByException{Deadband: 1, HeartbeatMs: 10_000, Time: keyed.ProcessingTimeDomain}})
	}
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		steps []procStep
	}{
		{"heartbeats repeat the last value", 0, []procStep{
			{clock: 1000, key: "a", v: "20", want: []string{"dev/p/a/report_by_exception/report/o1/0 t=1000 v=20"}},
			tick(10_999),
			tick(11_000, "dev/p/a/report_by_exception/heartbeat/o1/1 t=11000 v=20"),
			{clock: 15_000, key: "a", v: "20.5"}, // within the deadband
			tick(21_000, "dev/p/a/report_by_exception/heartbeat/o1/2 t=21000 v=20"),
			{clock: 23_000, key: "a", v: "25", want: []string{"dev/p/a/report_by_exception/report/o3/0 t=23000 v=25"}},
			tick(31_000),
			tick(33_000, "dev/p/a/report_by_exception/heartbeat/o3/1 t=33000 v=25"),
		}},
		{"a null value is repeated as null", 0, []procStep{
			{clock: 1000, key: "a", v: "null", want: []string{"dev/p/a/report_by_exception/report/o1/0 t=1000"}},
			tick(11_000, "dev/p/a/report_by_exception/heartbeat/o1/1 t=11000"),
		}},
		{"overdue after a restore: once", 0, []procStep{
			{clock: 1000, key: "a", v: "7", want: []string{"dev/p/a/report_by_exception/report/o1/0 t=1000 v=7"}},
			{clock: 100_000, restore: true},
			tick(100_000, "dev/p/a/report_by_exception/heartbeat/o1/1 t=11000 v=7"),
			tick(109_999),
			tick(110_000, "dev/p/a/report_by_exception/heartbeat/o1/2 t=110000 v=7"),
		}},
		{"end of input: one heartbeat", 0, []procStep{
			{clock: 1000, key: "a", v: "7", want: []string{"dev/p/a/report_by_exception/report/o1/0 t=1000 v=7"}},
			tick(math.MaxInt64, "dev/p/a/report_by_exception/heartbeat/o1/1 t=11000 v=7"),
		}},
		{"state_ttl ends the heartbeats", 15 * time.Second, []procStep{
			{clock: 1000, key: "a", v: "7", want: []string{"dev/p/a/report_by_exception/report/o1/0 t=1000 v=7"}},
			tick(11_000, "dev/p/a/report_by_exception/heartbeat/o1/1 t=11000 v=7"),
			{clock: 12_000, key: "b", ts: 17_000, v: "1", want: []string{"dev/p/b/report_by_exception/report/o2/0 t=17000 v=1"}},
			tick(21_000), // a's state expired at 16 000 on the readings' clock
			tick(22_000, "dev/p/b/report_by_exception/heartbeat/o2/1 t=22000 v=1"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runProcSteps(t, tc.ttl, []string{"event.v"}, report, tc.steps) })
	}
}

// TestKeyedStage_ChainedProcessingTimers chains report_by_exception
// (heartbeat 10 s) and absence (timeout 15 s) on processing time over one
// key: the key's timers are shared by the two blocks, so each firing runs
// both, and the one whose deadline it is not answers with its own deadline
// and emits nothing. Heartbeats go on while the key is silent; an overdue
// heartbeat after a restore comes once, and the absence deadline set
// before the restore still fires.
func TestKeyedStage_ChainedProcessingTimers(t *testing.T) {
	chain := func(k *KeyedStage, progs []*expr.Program) error {
		if err := k.SetReport(ReportSpec{Value: progs[0], Block: keyed.ReportByException{Deadband: 1, HeartbeatMs: 10_000, Time: keyed.ProcessingTimeDomain}}); err != nil {
			return err
		}
		return k.SetAbsence(AbsenceSpec{Block: keyed.Absence{TimeoutMs: 15_000, Time: keyed.ProcessingTimeDomain}})
	}
	runProcSteps(t, 0, []string{"event.v"}, chain, []procStep{
		{clock: 1000, key: "a", v: "20", want: []string{"dev/p/a/report_by_exception/report/o1/0 t=1000 v=20"}},
		tick(11_000, "dev/p/a/report_by_exception/heartbeat/o1/1 t=11000 v=20"),
		tick(15_999),
		tick(16_000, "dev/p/a/absence/silent/o1/0 t=16000 start=1000"),
		tick(21_000, "dev/p/a/report_by_exception/heartbeat/o1/2 t=21000 v=20"),
		{clock: 25_000, key: "a", v: "20.5", want: []string{"dev/p/a/absence/resumed/o1/0 t=25000 start=1000 end=25000"}},
		{clock: 35_000, restore: true},
		tick(35_000, "dev/p/a/report_by_exception/heartbeat/o1/3 t=31000 v=20"),
		tick(39_999),
		tick(40_000, "dev/p/a/absence/silent/o2/0 t=40000 start=25000"),
	})
}
