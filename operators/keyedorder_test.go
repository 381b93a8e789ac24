package operators

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/stream"
)

// orderStep is a reading of key at ts with payload, or, with payload "",
// the watermark moving to ts.
type orderStep struct {
	key     string
	ts      int64
	payload string
}

// runOrderSteps feeds steps to task, one batch per reading (its watermark
// the last one moved to), then the end-of-input watermark, and returns the
// records.
func runOrderSteps(t *testing.T, task *WindowTask, steps []orderStep) []string {
	t.Helper()
	wm := int64(math.MinInt64)
	for i, s := range steps {
		if s.payload == "" {
			wm = s.ts
			task.AdvanceWatermark(wm)
			continue
		}
		b := stream.NewBatch(0)
		b.AppendWatermarked([]byte(s.key), 1, s.ts, nil, []byte(s.payload), uint64(i+1), wm)
		task.Process(b, true)
	}
	return runToEnd(t, task, stream.NewBatch(0))
}

// ms formats a record time.
func ms(t int64) string { return time.UnixMilli(t).UTC().Format("2006-01-02T15:04:05.000Z") }

func reportRec(key string, t int64, seq int, value, s string) string {
	return fmt.Sprintf(`{"id":"dev/p/%s/report_by_exception/report/%d/%d","pipeline":"p","key":"%s","time":"%s","time_ms":%d,"kind":"report","value":%s,"s":"%s"}`,
		key, t, seq, key, ms(t), t, value, s)
}

func raisedRec(key string, t int64, seq int, start int64, s string) string {
	return fmt.Sprintf(`{"id":"dev/p/%s/hot/raised/%d/%d","pipeline":"p","key":"%s","time":"%s","time_ms":%d,"kind":"raised","start":"%s","start_ms":%d,"s":"%s"}`,
		key, t, seq, key, ms(t), t, ms(start), start, s)
}

func clearedRec(key string, t int64, seq int, start int64, s string) string {
	return fmt.Sprintf(`{"id":"dev/p/%s/hot/cleared/%d/%d","pipeline":"p","key":"%s","time":"%s","time_ms":%d,"kind":"cleared","start":"%s","start_ms":%d,"end":"%s","end_ms":%d,"duration_ms":%d,"s":"%s"}`,
		key, t, seq, key, ms(t), t, ms(start), start, ms(t), t, t-start, s)
}

func silentRec(t int64, seq int, start int64) string {
	return fmt.Sprintf(`{"id":"dev/p/a/absence/silent/%d/%d","pipeline":"p","key":"a","time":"%s","time_ms":%d,"kind":"silent","start":"%s","start_ms":%d,"s":null}`,
		t, seq, ms(t), t, ms(start), start)
}

func resumedRec(t int64, seq int, start int64, s string) string {
	return fmt.Sprintf(`{"id":"dev/p/a/absence/resumed/%d/%d","pipeline":"p","key":"a","time":"%s","time_ms":%d,"kind":"resumed","start":"%s","start_ms":%d,"end":"%s","end_ms":%d,"duration_ms":%d,"s":"%s"}`,
		t, seq, ms(t), t, ms(start), start, ms(t), t, t-start, s)
}

func readingRec(key string, t int64, offset int, s string) string {
	return fmt.Sprintf(`{"id":"dev/p/%s/%d/%d","pipeline":"p","key":"%s","time":"%s","time_ms":%d,"kind":"reading","s":"%s"}`,
		key, t, offset, key, ms(t), t, s)
}

// TestKeyedStage_BlocksInArrivalOrder runs each per-key block on
// out-of-order readings of one key in both orders: with order = "arrival"
// the block takes the readings as they came (the rules for older readings
// in each block's doc comment), with event-time order it sees them sorted
// and the readings behind the watermark are late. Every record was derived
// by hand from the rules.
func TestKeyedStage_BlocksInArrivalOrder(t *testing.T) {
	report := func(k *KeyedStage, progs []*expr.Program) error {
		return k.SetReport(ReportSpec{Value: progs[0], Block: keyed.ReportByException{Deadband: 1, HeartbeatMs: 10_000, Time: keyed.EventTimeDomain}})
	}
	alarm := func(k *KeyedStage, progs []*expr.Program) error {
		return k.SetAlarm(AlarmSpec{Name: "hot", Raise: progs[0], Clear: progs[1], Block: keyed.Alarm{MinDurationMs: 5000}})
	}
	dedup := func(k *KeyedStage, progs []*expr.Program) error {
		return k.SetDedup(progs[0], keyed.Dedup{WithinMs: 5000, Time: keyed.EventTimeDomain})
	}
	absence := func(k *KeyedStage, _ []*expr.Program) error {
		return k.SetAbsence(AbsenceSpec{Block: keyed.Absence{TimeoutMs: 5000, Time: keyed.EventTimeDomain}})
	}
	for _, tc := range []struct {
		name       string
		exprs      []string
		set        func(k *KeyedStage, progs []*expr.Program) error
		steps      []orderStep
		arrival    []string
		eventTime  []string
		lateEvents int64 // readings late in event-time order
	}{{
		// report_by_exception, deadband 1, heartbeat 10 s. Arrival: 3000
		// is the first; 1000 moved 4 from it; 2000 moved 0.5 from 1000's
		// 5; 12000 moved 0.2, and the heartbeat counts from the latest
		// time reported (3000), so none yet; 13000 is the heartbeat.
		// Event time: 1000 first, 2000 within the band, 3000 moved 4,
		// 12000 moved 4.2 from 3000's 1, 13000 within the band and 1 s
		// after the last report.
		name:  "report_by_exception",
		exprs: []string{"event.v"},
		set:   report,
		steps: []orderStep{
			{"a", 3000, `{"v":1,"s":"a"}`},
			{"a", 1000, `{"v":5,"s":"b"}`},
			{"a", 2000, `{"v":5.5,"s":"c"}`},
			{"a", 12000, `{"v":5.2,"s":"d"}`},
			{"a", 13000, `{"v":5.3,"s":"e"}`},
		},
		arrival: []string{
			reportRec("a", 3000, 0, "1", "a"),
			reportRec("a", 1000, 1, "5", "b"),
			reportRec("a", 13000, 2, "5.3", "e"),
		},
		eventTime: []string{
			reportRec("a", 1000, 0, "5", "b"),
			reportRec("a", 3000, 1, "1", "a"),
			reportRec("a", 12000, 2, "5.2", "d"),
		},
	}, {
		// alarm "hot": raise v > 80, clear v < 70, min_duration 5 s.
		// Arrival: 6000 starts the episode; the older 1000 does not move
		// its start back; 11000 is 5 s after it: raised; the older 9000
		// clears at once, at 9000. Event time: 1000 starts the episode,
		// 6000 raises it, 9000 clears, 11000 starts a new episode that
		// the input ends before it raises.
		name:  "alarm",
		exprs: []string{"event.v > 80", "event.v < 70"},
		set:   alarm,
		steps: []orderStep{
			{"k", 6000, `{"v":85,"s":"a"}`},
			{"k", 1000, `{"v":90,"s":"b"}`},
			{"k", 11000, `{"v":91,"s":"c"}`},
			{"k", 9000, `{"v":60,"s":"d"}`},
		},
		arrival: []string{
			raisedRec("k", 11000, 0, 6000, "c"),
			clearedRec("k", 9000, 1, 6000, "d"),
		},
		eventTime: []string{
			raisedRec("k", 6000, 0, 1000, "a"),
			clearedRec("k", 9000, 1, 1000, "d"),
		},
	}, {
		// dedup of event.id within 5 s, then reading records. Arrival:
		// 6000 passes; 10000 and 2000 are each less than 5 s from it;
		// 11000 is 5 s after it: passes. Event time: 2000 passes, 6000
		// is 4 s after it, 10000 8 s after it passes, 11000 is 1 s after
		// that.
		name:  "dedup",
		exprs: []string{"event.id"},
		set:   dedup,
		steps: []orderStep{
			{"a", 6000, `{"id":"m1","s":"a"}`},
			{"a", 10000, `{"id":"m1","s":"b"}`},
			{"a", 2000, `{"id":"m1","s":"c"}`},
			{"a", 11000, `{"id":"m1","s":"d"}`},
		},
		arrival: []string{
			readingRec("a", 6000, 1, "a"),
			readingRec("a", 11000, 4, "d"),
		},
		eventTime: []string{
			readingRec("a", 2000, 3, "c"),
			readingRec("a", 10000, 2, "b"),
		},
	}, {
		// absence, timeout 5 s, event time. Arrival: 1000, then 4000
		// moves the deadline to 9000; the older 2000 does not move it
		// back; the watermark at 9000 makes the key silent from 4000; the
		// older 3000 resumes it at 4000 (End = max(t, Start)) and starts
		// a deadline at 9000 again, which the end of the input fires.
		// Event time: the watermark at 8500 releases 1000, 2000 and 4000
		// (deadline 9000), 9000 fires it, 3000 is late.
		name: "absence",
		set:  absence,
		steps: []orderStep{
			{"a", 1000, `{"s":"a"}`},
			{"a", 4000, `{"s":"b"}`},
			{"a", 2000, `{"s":"c"}`},
			{"", 8500, ""},
			{"", 9000, ""},
			{"a", 3000, `{"s":"d"}`},
		},
		arrival: []string{
			silentRec(9000, 0, 4000),
			resumedRec(4000, 1, 4000, "d"),
			silentRec(9000, 2, 4000),
		},
		eventTime: []string{
			silentRec(9000, 0, 4000),
		},
		lateEvents: 1,
	}} {
		for _, order := range []keyed.Order{keyed.Arrival, keyed.EventTime} {
			name, want, late := "arrival", tc.arrival, int64(0)
			if order == keyed.EventTime {
				name, want, late = "event_time", tc.eventTime, tc.lateEvents
			}
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				task := blockTaskIn(t, order, 0, tc.exprs, tc.set)
				got := runOrderSteps(t, task, tc.steps)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if task.Late != late {
					t.Errorf("%d late readings, want %d", task.Late, late)
				}
			})
		}
	}
}
