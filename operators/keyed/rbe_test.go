package keyed

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
)

type rbeRunner struct {
	b  ReportByException
	st ReportState
}

func init() {
	newBlockRunner["rbe"] = func(fs []string) (blockRunner, error) {
		opts, err := parseOpts(fs, "deadband", "heartbeat", "time")
		if err != nil {
			return nil, err
		}
		r := &rbeRunner{}
		if r.b.Deadband, err = strconv.ParseFloat(opts["deadband"], 64); err != nil {
			return nil, fmt.Errorf("deadband: %w", err)
		}
		if r.b.HeartbeatMs, err = optMs(opts, "heartbeat"); err != nil {
			return nil, err
		}
		if r.b.Time, err = parseDomain(opts["time"], EventTimeDomain); err != nil {
			return nil, err
		}
		return r, r.b.Validate()
	}
}

func (r *rbeRunner) reading(at At, args []string, emit func(Signal)) (int64, string, error) {
	if len(args) != 1 {
		return 0, "", fmt.Errorf("rbe reading takes one value, got %v", args)
	}
	v, err := parseValue(args[0])
	if err != nil {
		return 0, "", err
	}
	r.b.OnReading(&r.st, at, v, emit)
	return r.b.NextTimer(r.st), "", nil
}

// timer fires the processing-time heartbeat timer at now.
func (r *rbeRunner) timer(now int64, emit func(Signal)) (int64, error) {
	if r.b.Time != ProcessingTimeDomain {
		return 0, errors.New("report_by_exception has no timer on event time")
	}
	return r.b.OnTimer(&r.st, now, emit), nil
}

func (r *rbeRunner) domain() TimeDomain { return r.b.Time }

func (r *rbeRunner) roundTrip() (err error) {
	r.st, err = roundTrip(ReportCodec{Offsets: r.b.Time == ProcessingTimeDomain}, r.st)
	return err
}

func TestReportByException_Scenarios(t *testing.T) {
	runBlockScenarios(t, "testdata/blocks/rbe.txt", "rbe")
}

func TestReportCodec_Corrupt(t *testing.T) {
	enc := ReportCodec{}.Append(nil, ReportState{Reported: true, Seq: 3, Value: 1.5, Time: 99})
	bad := append([]byte(nil), enc...)
	bad[1] = 0x04
	short := append([]byte(nil), enc...)
	short[1] |= reportFrom // the flag of the offsets, without them
	checkCorrupt(t, ReportCodec{}, enc, map[string][]byte{"unknown flag": bad, "offsets flag, no offsets": short})
}

func FuzzReportCodec_Decode(f *testing.F) {
	f.Add(ReportCodec{}.Append(nil, ReportState{}))
	f.Add(ReportCodec{}.Append(nil, ReportState{Reported: true, Seq: 3, Value: 1.5, Time: 99}))
	f.Add(ReportCodec{}.Append(nil, ReportState{Reported: true, Value: math.NaN(), Time: -1}))
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Add(ReportCodec{Offsets: true}.Append(nil, ReportState{Reported: true, Seq: 4, Value: 2, Time: 5, From: 42, Beats: 3}))
	// As for AbsenceCodec: both forms are read, each re-encoded by the
	// codec that writes it.
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzDecode(t, ReportCodec{Offsets: len(b) > 1 && b[1]&reportFrom != 0}, b)
	})
}

// driftingValues is a slowly drifting sensor's readings, precomputed so the
// benchmarks time the block, not math.Sin: about one in a hundred moves
// the deadband 0.2 from the last report.
var driftingValues = func() []float64 {
	vs := make([]float64, 1<<14)
	for i := range vs {
		vs[i] = 20 + 0.3*math.Sin(float64(i)/600)
	}
	return vs
}()

// BenchmarkReportByException: one reading of a slowly drifting sensor.
func BenchmarkReportByException(b *testing.B) {
	r := ReportByException{Deadband: 0.2, HeartbeatMs: 600_000, Time: EventTimeDomain}
	var st ReportState
	var reports int
	emit := func(Signal) { reports++ }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.OnReading(&st, At{Event: int64(i) * 1000}, driftingValues[i&(len(driftingValues)-1)], emit)
	}
	b.ReportMetric(float64(reports)/float64(b.N), "reports/op")
}

// BenchmarkReportByException_Codec: decode, step and encode, as the host
// does per reading with the state in a ValueState.
func BenchmarkReportByException_Codec(b *testing.B) {
	r := ReportByException{Deadband: 0.2, HeartbeatMs: 600_000, Time: EventTimeDomain}
	enc := ReportCodec{}.Append(nil, ReportState{})
	emit := func(Signal) {}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st, err := ReportCodec{}.Decode(enc)
		if err != nil {
			b.Fatal(err)
		}
		r.OnReading(&st, At{Event: int64(i) * 1000}, driftingValues[i&(len(driftingValues)-1)], emit)
		enc = ReportCodec{}.Append(enc[:0], st)
	}
}
