package decode

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/eddy-edge/eddy/operators/event"
)

// Timestamp extracts a record's event time from one slot. It is immutable
// and safe for concurrent use.
type Timestamp struct {
	slot   int
	unit   string
	mul    float64 // value × mul ÷ div is milliseconds: exact powers of ten,
	div    float64 // so no inexact 1e-3 enters the arithmetic
	layout string  // "" (numbers only), "rfc3339", or a Go time layout
}

// maxMillis bounds extracted times to ±2^53 ms (about ±285,000 years), so that
// every result is exact as a float64 too and window arithmetic cannot
// overflow int64.
const maxMillis = 1 << 53

// NewTimestamp returns a Timestamp that reads the field in slot. unit is the
// unit of numeric values: "s", "ms", "us" or "ns" ("" means "ms"). layout
// says how string values are read: "" as a number in unit, "rfc3339" as
// RFC 3339 with optional fractional seconds (time.RFC3339Nano), anything else
// as a Go time layout (reference time "2006-01-02T15:04:05Z07:00"; a layout
// without a zone reads UTC).
func NewTimestamp(slot int, unit, layout string) (*Timestamp, error) {
	if slot < 0 {
		return nil, errors.New("decode: timestamp slot " + strconv.Itoa(slot) + " is negative")
	}
	t := &Timestamp{slot: slot, unit: unit, layout: layout, mul: 1, div: 1}
	switch unit {
	case "s":
		t.mul = 1000
	case "", "ms":
		t.unit = "ms"
	case "us":
		t.div = 1e3
	case "ns":
		t.div = 1e6
	default:
		return nil, errors.New(`decode: timestamp unit ` + strconv.Quote(unit) + ` is not one of "s", "ms", "us", "ns"`)
	}
	if layout == "rfc3339" || layout == "RFC3339" {
		t.layout = time.RFC3339Nano
	}
	return t, nil
}

// Extract returns the record's event time in milliseconds since the Unix
// epoch, rounded down to the millisecond (toward the past, also before 1970).
//
// A Number is scaled by unit; fractions are allowed (1700000000.5 s →
// 1700000000500 ms), and a result within float64 precision of a whole
// millisecond is that millisecond (1700000000.123 s → ...123 ms, although
// the float64 is slightly below). A String is parsed with the layout, or as a
// decimal number in unit when the layout is "". Missing or Null →
// *Error{Reason: "missing_timestamp"}; Bool → "wrong_type"; unparsable or
// beyond ±2^53 ms → "bad_timestamp". Numbers, number strings and RFC 3339
// strings are extracted without allocating; other layouts use time.Parse.
func (t *Timestamp) Extract(rec *event.Record) (int64, error) {
	if t.slot >= len(rec.Fields) {
		return 0, &Error{Reason: ReasonMissingTimestamp, Detail: "no timestamp field"}
	}
	v := rec.Fields[t.slot]
	switch v.Kind {
	case event.Number:
		return t.millis(v.Num)
	case event.String:
		if t.layout == "" {
			if !isDecimal(v.Str) {
				return 0, badTimestamp("not a number", v.Str)
			}
			f, ok := parseFloat(v.Str)
			if !ok {
				return 0, badTimestamp("out of range", v.Str)
			}
			return t.millis(f)
		}
		if t.layout == time.RFC3339Nano {
			if ms, ok := parseRFC3339Millis(v.Str); ok {
				return ms, nil
			}
			// Fall through to time.Parse for anything the fast parser
			// declines, so both agree on what is accepted.
		}
		tm, err := time.Parse(t.layout, string(v.Str))
		if err != nil {
			return 0, badTimestamp("does not match the layout", v.Str)
		}
		ms := tm.UnixMilli()
		if ms <= -maxMillis || ms >= maxMillis {
			return 0, badTimestamp("out of range", v.Str)
		}
		return ms, nil
	case event.Bool:
		return 0, &Error{Reason: ReasonWrongType, Detail: "timestamp is a boolean"}
	}
	return 0, &Error{Reason: ReasonMissingTimestamp, Detail: "timestamp is " + v.Kind.String()}
}

// millis converts a value in t's unit to whole milliseconds, rounding down.
func (t *Timestamp) millis(f float64) (int64, error) {
	ms := f * t.mul / t.div
	if !(math.Abs(ms) < maxMillis) { // also NaN and ±Inf
		return 0, &Error{Reason: ReasonBadTimestamp, Detail: "timestamp " + strconv.FormatFloat(f, 'g', -1, 64) + " " + t.unit + " is out of range"}
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		// Whole numbers are exact in int64 (and the check above keeps the
		// product in range): floor-divide for us and ns.
		n := int64(f)
		switch t.unit {
		case "s":
			n *= 1000
		case "us":
			n = floorDiv(n, 1000)
		case "ns":
			n = floorDiv(n, 1_000_000)
		}
		return n, nil
	}
	// The float64 may sit a hair below the whole millisecond its decimal text
	// meant (1700000000.123 s × 1000 = ...122.99998); snap to it when within
	// a few ulps, else round down.
	if r := math.Round(ms); math.Abs(ms-r) <= math.Abs(ms)*0x1p-50 {
		return int64(r), nil
	}
	return int64(math.Floor(ms)), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func badTimestamp(what string, s []byte) error {
	const maxShown = 64
	if len(s) > maxShown {
		s = s[:maxShown]
	}
	return &Error{Reason: ReasonBadTimestamp, Detail: "timestamp " + strconv.Quote(string(s)) + " " + what}
}
