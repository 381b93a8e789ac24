package keyed

import (
	"fmt"
	"math"
	"testing"
)

type absenceRunner struct {
	b  Absence
	st AbsenceState
}

func init() {
	newBlockRunner["absence"] = func(fs []string) (blockRunner, error) {
		opts, err := parseOpts(fs, "timeout", "time")
		if err != nil {
			return nil, err
		}
		r := &absenceRunner{}
		if r.b.TimeoutMs, err = optMs(opts, "timeout"); err != nil {
			return nil, err
		}
		if r.b.Time, err = parseDomain(opts["time"], ProcessingTimeDomain); err != nil {
			return nil, err
		}
		return r, r.b.Validate()
	}
}

func (r *absenceRunner) reading(at At, args []string, emit func(Signal)) (int64, string, error) {
	if len(args) != 0 {
		return 0, "", fmt.Errorf("absence reading takes no arguments, got %v", args)
	}
	next := r.b.OnReading(&r.st, at, emit)
	if want := r.b.NextTimer(r.st); next != want {
		return 0, "", fmt.Errorf("OnReading returned timer %s, NextTimer says %s", timerString(next), timerString(want))
	}
	return next, "", nil
}

// timer fires at now in the block's domain: a scenario's "timer" time is
// the watermark or the processing clock.
func (r *absenceRunner) timer(now int64, emit func(Signal)) (int64, error) {
	next := r.b.OnTimer(&r.st, now, emit)
	if want := r.b.NextTimer(r.st); next != want {
		return 0, fmt.Errorf("OnTimer returned timer %s, NextTimer says %s", timerString(next), timerString(want))
	}
	return next, nil
}

func (r *absenceRunner) domain() TimeDomain { return r.b.Time }

func (r *absenceRunner) roundTrip() (err error) {
	r.st, err = roundTrip(AbsenceCodec{}, r.st)
	return err
}

func TestAbsence_Scenarios(t *testing.T) {
	runBlockScenarios(t, "testdata/blocks/absence.txt", "absence")
}

// TestAbsence_SaturatedDeadline: a deadline past the end of time is
// math.MaxInt64, a real timer that only the end-of-input watermark fires,
// never NoTimer and never a time in the past.
func TestAbsence_SaturatedDeadline(t *testing.T) {
	a := Absence{TimeoutMs: 10, Time: EventTimeDomain}
	var st AbsenceState
	var got []Signal
	emit := func(s Signal) { got = append(got, s) }
	if next := a.OnReading(&st, At{Event: math.MaxInt64 - 5}, emit); next != math.MaxInt64 {
		t.Fatalf("next = %d, want MaxInt64", next)
	}
	if next := a.OnTimer(&st, math.MaxInt64-1, emit); next != math.MaxInt64 || len(got) != 0 {
		t.Fatalf("early timer: next %d, signals %v", next, got)
	}
	if next := a.OnTimer(&st, math.MaxInt64, emit); next != NoTimer || len(got) != 1 || got[0].Time != math.MaxInt64 {
		t.Fatalf("end of input: next %d, signals %v", next, got)
	}
}

func TestAbsenceCodec_Corrupt(t *testing.T) {
	enc := AbsenceCodec{}.Append(nil, AbsenceState{Seen: true, Seq: 2, Last: 5})
	silentUnseen := append([]byte(nil), enc...)
	silentUnseen[1] = absenceSilent
	unknown := append([]byte(nil), enc...)
	unknown[1] = 0x04 | absenceSeen
	checkCorrupt(t, AbsenceCodec{}, enc, map[string][]byte{"silent, never seen": silentUnseen, "unknown flag": unknown})
}

func FuzzAbsenceCodec_Decode(f *testing.F) {
	f.Add(AbsenceCodec{}.Append(nil, AbsenceState{}))
	f.Add(AbsenceCodec{}.Append(nil, AbsenceState{Seen: true, Seq: 1, Last: 1000}))
	f.Add(AbsenceCodec{}.Append(nil, AbsenceState{Seen: true, Silent: true, Seq: 9, Last: -1}))
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, AbsenceCodec{}, b) })
}

// BenchmarkAbsence: one reading per second of a key with a 5-minute
// timeout, and the timer the host would fire each minute.
func BenchmarkAbsence(b *testing.B) {
	a := Absence{TimeoutMs: 300_000, Time: ProcessingTimeDomain}
	var st AbsenceState
	emit := func(Signal) {}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := int64(i) * 1000
		a.OnReading(&st, At{Event: now, Proc: now}, emit)
		if i%60 == 0 {
			a.OnTimer(&st, now, emit)
		}
	}
}
