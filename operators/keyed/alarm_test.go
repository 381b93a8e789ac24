package keyed

import (
	"errors"
	"fmt"
	"testing"
)

type alarmRunner struct {
	b  Alarm
	st AlarmState
}

func init() {
	newBlockRunner["alarm"] = func(fs []string) (blockRunner, error) {
		opts, err := parseOpts(fs, "min_duration")
		if err != nil {
			return nil, err
		}
		r := &alarmRunner{}
		if r.b.MinDurationMs, err = optMs(opts, "min_duration"); err != nil {
			return nil, err
		}
		return r, r.b.Validate()
	}
}

func (r *alarmRunner) reading(at At, args []string, emit func(Signal)) (int64, string, error) {
	if len(args) != 1 {
		return 0, "", fmt.Errorf("alarm reading takes raise|clear|both|none, got %v", args)
	}
	var raise, clear bool
	switch args[0] {
	case "raise":
		raise = true
	case "clear":
		clear = true
	case "both":
		raise, clear = true, true
	case "none":
	default:
		return 0, "", fmt.Errorf("alarm reading %q: want raise|clear|both|none", args[0])
	}
	r.b.OnReading(&r.st, at, raise, clear, emit)
	return NoTimer, "", nil
}

func (r *alarmRunner) timer(int64, func(Signal)) (int64, error) {
	return 0, errors.New("alarm has no timer")
}

func (r *alarmRunner) domain() TimeDomain { return EventTimeDomain }

func (r *alarmRunner) roundTrip() (err error) {
	r.st, err = roundTrip(AlarmCodec{}, r.st)
	return err
}

func TestAlarm_Scenarios(t *testing.T) {
	runBlockScenarios(t, "testdata/blocks/alarm.txt", "alarm")
}

// TestAlarm_OneSignalPerTransition drives an alarm with every sequence of
// four readings of the four kinds, from every phase, and checks the
// invariants: raised and cleared alternate starting with raised, at most one
// signal per reading, Seq counts them.
func TestAlarm_OneSignalPerTransition(t *testing.T) {
	kinds := [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}}
	for _, min := range []int64{0, 2} {
		for seq := 0; seq < 1<<(2*6); seq++ {
			a := Alarm{MinDurationMs: min}
			var st AlarmState
			var got []Signal
			emit := func(s Signal) { got = append(got, s) }
			for i := 0; i < 6; i++ {
				k := kinds[seq>>(2*i)&3]
				n := len(got)
				a.OnReading(&st, At{Event: int64(i)}, k[0], k[1], emit)
				if len(got)-n > 1 {
					t.Fatalf("min %d, inputs %b: %d signals from one reading", min, seq, len(got)-n)
				}
			}
			for i, s := range got {
				want := Raised
				if i%2 == 1 {
					want = Cleared
				}
				if s.Kind != want || s.Seq != uint32(i) || s.Kind == Raised && s.Time-s.Start < min || s.Kind == Cleared && s.Duration() < 0 {
					t.Fatalf("min %d, inputs %b: signal %d is %v", min, seq, i, s)
				}
			}
			if raised := len(got)%2 == 1; raised != (st.Phase == AlarmRaised) {
				t.Fatalf("min %d, inputs %b: phase %v after %d signals", min, seq, st.Phase, len(got))
			}
		}
	}
}

func TestAlarmCodec_Corrupt(t *testing.T) {
	enc := AlarmCodec{}.Append(nil, AlarmState{Phase: AlarmRaised, Seq: 2, Since: 5})
	bad := append([]byte(nil), enc...)
	bad[1] = 3
	checkCorrupt(t, AlarmCodec{}, enc, map[string][]byte{"unknown phase": bad})
}

func FuzzAlarmCodec_Decode(f *testing.F) {
	f.Add(AlarmCodec{}.Append(nil, AlarmState{}))
	f.Add(AlarmCodec{}.Append(nil, AlarmState{Phase: AlarmPending, Seq: 1, Since: 1000}))
	f.Add(AlarmCodec{}.Append(nil, AlarmState{Phase: AlarmRaised, Seq: 9, Since: -1}))
	f.Add([]byte{1, 3})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, AlarmCodec{}, b) })
}

// BenchmarkAlarm: one reading of a sensor that overheats for 60 of every
// 600 readings, with min_duration 30 readings.
func BenchmarkAlarm(b *testing.B) {
	a := Alarm{MinDurationMs: 30_000}
	var st AlarmState
	var signals int
	emit := func(Signal) { signals++ }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		hot := i%600 < 60
		a.OnReading(&st, At{Event: int64(i) * 1000}, hot, !hot, emit)
	}
	b.ReportMetric(float64(signals)/float64(b.N), "signals/op")
}
