package decode

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/event"
)

func recordWith(v event.Value) *event.Record {
	return &event.Record{Fields: []event.Value{{}, v}}
}

func TestTimestamp_Extract(t *testing.T) {
	num := event.NumberValue
	str := func(s string) event.Value { return event.StringValue([]byte(s)) }
	tests := []struct {
		name   string
		unit   string
		layout string
		v      event.Value
		want   int64
	}{
		{"ms", "ms", "", num(1700000000123), 1700000000123},
		{"default unit is ms", "", "", num(1700000000123), 1700000000123},
		{"s", "s", "", num(1700000000), 1700000000000},
		{"s fraction half", "s", "", num(1700000000.5), 1700000000500},
		{"s fraction snaps to the meant ms", "s", "", num(1700000000.123), 1700000000123},
		{"s sub-ms rounds down", "s", "", num(1.0009), 1000},
		{"us", "us", "", num(1700000000123456), 1700000000123},
		{"ns", "ns", "", num(1700000000123456789), 1700000000123},
		{"ms fraction rounds down", "ms", "", num(12.9), 12},
		{"negative ms", "ms", "", num(-5), -5},
		{"negative s", "s", "", num(-1.5), -1500},
		{"negative us rounds toward the past", "us", "", num(-1500), -2},
		{"negative ns rounds toward the past", "ns", "", num(-1), -1},
		{"negative ms fraction rounds toward the past", "ms", "", num(-0.5), -1},
		{"zero", "s", "", num(0), 0},
		{"number string", "ms", "", str("1700000000123"), 1700000000123},
		{"number string s fraction", "s", "", str("1700000000.250"), 1700000000250},
		{"number string negative", "s", "", str("-86400"), -86400000},
		{"number with layout still scaled", "s", "rfc3339", num(2), 2000},
		{"rfc3339 Z", "ms", "rfc3339", str("2023-11-14T22:13:20Z"), 1700000000000},
		{"rfc3339 millis", "ms", "rfc3339", str("2023-11-14T22:13:20.123Z"), 1700000000123},
		{"rfc3339 nanos round down", "ms", "rfc3339", str("2023-11-14T22:13:20.123999999Z"), 1700000000123},
		{"rfc3339 offset", "ms", "rfc3339", str("2023-11-15T00:13:20+02:00"), 1700000000000},
		{"rfc3339 negative offset", "ms", "rfc3339", str("2023-11-14T17:13:20.5-05:00"), 1700000000500},
		{"rfc3339 before epoch", "ms", "rfc3339", str("1969-12-31T23:59:59.999Z"), -1},
		{"rfc3339 leap day", "ms", "rfc3339", str("2024-02-29T00:00:00Z"), 1709164800000},
		{"RFC3339 spelled in capitals", "ms", "RFC3339", str("2023-11-14T22:13:20Z"), 1700000000000},
		{"go layout", "ms", "2006-01-02 15:04:05", str("2023-11-14 22:13:20"), 1700000000000},
		{"go layout with zone", "ms", "02/01/2006 15:04 MST -0700", str("14/11/2023 23:13 CET +0100"), 1700000000000 - 20000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := NewTimestamp(1, tt.unit, tt.layout)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ts.Extract(recordWith(tt.v))
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if got != tt.want {
				t.Errorf("Extract = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTimestamp_Extract_Errors(t *testing.T) {
	str := func(s string) event.Value { return event.StringValue([]byte(s)) }
	tests := []struct {
		name   string
		unit   string
		layout string
		v      event.Value
		reason string
	}{
		{"missing", "ms", "", event.Value{}, ReasonMissingTimestamp},
		{"null", "ms", "", event.Value{Kind: event.Null}, ReasonMissingTimestamp},
		{"bool", "ms", "", event.BoolValue(true), ReasonWrongType},
		{"text without layout", "ms", "", str("yesterday"), ReasonBadTimestamp},
		{"empty string", "ms", "", str(""), ReasonBadTimestamp},
		{"NaN string", "ms", "", str("NaN"), ReasonBadTimestamp},
		{"overflow string", "ms", "", str("1e400"), ReasonBadTimestamp},
		{"too large", "s", "", event.NumberValue(1e17), ReasonBadTimestamp},
		{"too large wraps int64", "s", "", event.NumberValue(18446744073709552), ReasonBadTimestamp},
		{"just beyond 2^53 ms", "ms", "", event.NumberValue(1 << 53), ReasonBadTimestamp},
		{"too large fraction", "ms", "", event.NumberValue(1e300), ReasonBadTimestamp},
		{"NaN", "ms", "", event.NumberValue(math.NaN()), ReasonBadTimestamp},
		{"Inf", "ms", "", event.NumberValue(math.Inf(-1)), ReasonBadTimestamp},
		{"rfc3339 garbage", "ms", "rfc3339", str("2023-13-01T00:00:00Z"), ReasonBadTimestamp},
		{"rfc3339 no zone", "ms", "rfc3339", str("2023-11-14T22:13:20"), ReasonBadTimestamp},
		{"rfc3339 feb 30", "ms", "rfc3339", str("2023-02-30T00:00:00Z"), ReasonBadTimestamp},
		{"layout mismatch", "ms", "2006-01-02", str("14.11.2023"), ReasonBadTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := NewTimestamp(1, tt.unit, tt.layout)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ts.Extract(recordWith(tt.v))
			var de *Error
			if !errors.As(err, &de) || de.Reason != tt.reason {
				t.Fatalf("Extract = %v, want reason %q", err, tt.reason)
			}
		})
	}
}

func TestTimestamp_Extract_SlotBeyondRecord(t *testing.T) {
	ts, err := NewTimestamp(5, "ms", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ts.Extract(recordWith(event.NumberValue(1)))
	var de *Error
	if !errors.As(err, &de) || de.Reason != ReasonMissingTimestamp {
		t.Fatalf("Extract = %v, want missing_timestamp", err)
	}
}

func TestNewTimestamp_Invalid(t *testing.T) {
	for _, tt := range []struct {
		slot int
		unit string
	}{{-1, "ms"}, {0, "sec"}, {0, "MS"}, {0, "m"}} {
		if _, err := NewTimestamp(tt.slot, tt.unit, ""); err == nil {
			t.Errorf("NewTimestamp(%d, %q) succeeded", tt.slot, tt.unit)
		}
	}
}

func TestTimestamp_Extract_ZeroAllocs(t *testing.T) {
	tests := []struct {
		unit, layout string
		v            event.Value
	}{
		{"ms", "", event.NumberValue(1700000000123)},
		{"s", "", event.NumberValue(1700000000.123)},
		{"ns", "", event.NumberValue(1700000000123456789)},
		{"ms", "", event.StringValue([]byte("1700000000123"))},
		{"ms", "rfc3339", event.StringValue([]byte("2023-11-14T22:13:20.123+01:00"))},
	}
	for _, tt := range tests {
		ts, err := NewTimestamp(1, tt.unit, tt.layout)
		if err != nil {
			t.Fatal(err)
		}
		rec := recordWith(tt.v)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := ts.Extract(rec); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("Extract(%s %s): allocs = %v, want 0", tt.unit, valueString(tt.v), allocs)
		}
	}
}

// TestParseRFC3339Millis_MatchesTimeParse checks the allocation-free parser
// against time.Parse on random instants and offsets, before and after 1970.
func TestParseRFC3339Millis_MatchesTimeParse(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 20000 {
		sec := rng.Int64N(253402300799) - 62135596800 // years 0001 to 9999
		nsec := rng.Int64N(1e9)
		zone := time.FixedZone("", (rng.IntN(48)-24)*1800)
		tm := time.Unix(sec, nsec).In(zone)
		if tm.Year() < 1 || tm.Year() > 9999 {
			continue
		}
		var s string
		switch rng.IntN(3) {
		case 0:
			s = tm.Format(time.RFC3339)
		case 1:
			s = tm.Format(time.RFC3339Nano)
		default:
			s = tm.Format("2006-01-02T15:04:05.000Z07:00")
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("time.Parse(%q): %v", s, err)
		}
		got, ok := parseRFC3339Millis([]byte(s))
		if !ok || got != want.UnixMilli() {
			t.Fatalf("parseRFC3339Millis(%q) = %d, %v; time.Parse gives %d", s, got, ok, want.UnixMilli())
		}
	}
}

func BenchmarkTimestamp_Extract(b *testing.B) {
	for _, bc := range []struct {
		name, unit, layout string
		v                  event.Value
	}{
		{"number_ms", "ms", "", event.NumberValue(1700000000123)},
		{"number_s_fraction", "s", "", event.NumberValue(1700000000.123)},
		{"rfc3339", "ms", "rfc3339", event.StringValue([]byte("2023-11-14T22:13:20.123Z"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ts, err := NewTimestamp(1, bc.unit, bc.layout)
			if err != nil {
				b.Fatal(err)
			}
			rec := recordWith(bc.v)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ts.Extract(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
