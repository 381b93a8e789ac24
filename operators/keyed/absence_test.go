package keyed

import (
	"fmt"
	"math"
	"math/rand/v2"
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
	r.st, err = roundTrip(AbsenceCodec{Offsets: r.b.Time == ProcessingTimeDomain}, r.st)
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
	unknown[1] = 0x08 | absenceSeen
	short := append([]byte(nil), enc...)
	short[1] |= absenceFrom // the flag of the offset, without it
	checkCorrupt(t, AbsenceCodec{}, enc, map[string][]byte{"silent, never seen": silentUnseen, "unknown flag": unknown, "offset flag, no offset": short})
}

func FuzzAbsenceCodec_Decode(f *testing.F) {
	f.Add(AbsenceCodec{}.Append(nil, AbsenceState{}))
	f.Add(AbsenceCodec{}.Append(nil, AbsenceState{Seen: true, Seq: 1, Last: 1000}))
	f.Add(AbsenceCodec{}.Append(nil, AbsenceState{Seen: true, Silent: true, Seq: 9, Last: -1}))
	f.Add([]byte{1, 2})
	f.Add(AbsenceCodec{Offsets: true}.Append(nil, AbsenceState{Seen: true, Seq: 3, Last: 7, From: 42}))
	// Decode reads both forms whatever its codec's Offsets (a state written
	// with offsets stays readable by a pipeline without them): the form
	// read is re-encoded by the codec that writes it.
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecode(t, AbsenceCodec{Offsets: len(b) > 1 && b[1]&absenceFrom != 0}, b)
	})
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

// TestAbsence_MatchesGapModel drives Absence with seeded random readings
// and timer calls, times never going back, and compares its signals with
// a naive model: every gap of at least Timeout between two readings is one
// silence (Silent at the first + Timeout, then Resumed with the gap), and
// a last gap is one more Silent if a timer call reached its deadline.
// However the timer calls fall, the signals must be the model's.
func TestAbsence_MatchesGapModel(t *testing.T) {
	seed := uint64(1)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for run := 0; run < 500; run++ {
		timeout := 1 + rng.Int64N(20)
		a := Absence{TimeoutMs: timeout, Time: ProcessingTimeDomain}
		var st AbsenceState
		var got []Signal
		emit := func(s Signal) { got = append(got, s) }
		var readings []int64
		var lastTimer int64 = math.MinInt64
		now := rng.Int64N(100)
		for i := 0; i < 30; i++ {
			now += rng.Int64N(2 * timeout)
			if rng.IntN(3) == 0 {
				a.OnTimer(&st, now, emit)
				lastTimer = now
				continue
			}
			a.OnReading(&st, At{Event: -now, Proc: now}, emit)
			readings = append(readings, now)
		}
		var want []Signal
		seq := uint32(0)
		for i := 1; i < len(readings); i++ {
			if gap := readings[i] - readings[i-1]; gap >= timeout {
				want = append(want,
					Signal{Kind: Silent, Seq: seq, Time: readings[i-1] + timeout, Start: readings[i-1]},
					Signal{Kind: Resumed, Seq: seq + 1, Time: readings[i], Start: readings[i-1], End: readings[i]})
				seq += 2
			}
		}
		if n := len(readings); n > 0 && lastTimer >= readings[n-1]+timeout {
			want = append(want, Signal{Kind: Silent, Seq: seq, Time: readings[n-1] + timeout, Start: readings[n-1]})
		}
		if !sameSignals(got, want) {
			t.Fatalf("run %d, timeout %d, readings %v, last timer %d: signals\n%v\nwant\n%v", run, timeout, readings, lastTimer, got, want)
		}
	}
}
