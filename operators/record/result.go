package record

import (
	"fmt"
	"strconv"
	"time"

	"github.com/eddy-edge/eddy/operators/jsontext"
)

// Kinds of firing, as they appear in the "kind" field of the output record.
const (
	KindFinal      = "final"       // the watermark passed the window's end
	KindEarly      = "early"       // a trigger fired before the end
	KindLateUpdate = "late_update" // a late reading within allowed lateness re-fired the window
)

// Result is one window firing, ready to encode.
//
// Key and Values alias caller memory that is valid only during the call that
// receives the Result (AppendJSON, a sink's Template.Append or Write); a sink that
// needs them later copies them. Names and Values are parallel: Names[i] is
// the name of the aggregate whose value is Values[i], in config order.
type Result struct {
	Pipeline string
	Key      []byte
	Start    int64  // window start, Unix ms, inclusive
	End      int64  // window end, Unix ms, exclusive
	Kind     string // KindFinal, KindEarly or KindLateUpdate
	Firing   int    // 0 for the first firing of the window, then 1, 2, …
	Names    []string
	Values   []float64 // NaN (and ±Inf) are written as null
	// Seq is the source position of the reading a KindReading record is
	// of (0 for window firings): with Key and Start it makes the record's
	// id, and orders records of one key and time.
	Seq uint64
	// Definition is the short hash of the pipeline definition that
	// produced the firing: after a change of the pipeline the old and the
	// new definition both emit for a while; "" writes no field.
	Definition string
}

// timeLayout is RFC 3339 with exactly three fractional digits; for a UTC
// time the zone is written as "Z".
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendJSON appends r to dst as one JSON object (no trailing newline) and
// returns the extended buffer. The fields, in this order:
//
//	id               "<deviceID>/<pipeline>/<key>/<start_ms>-<end_ms>/<firing>"
//	pipeline, key    strings
//	window_start     RFC 3339 UTC with milliseconds, e.g. "2026-11-29T10:00:00.000Z"
//	window_end       the same for End
//	window_start_ms  Start as an integer
//	window_end_ms    End as an integer
//	kind             r.Kind
//	firing           r.Firing
//	definition       r.Definition, when not empty
//	<Names[i]>       Values[i] for each aggregate, in order; NaN and ±Inf → null
//
// The id is deterministic, so a consumer can drop a firing it has already
// seen (outputs of a restored epoch may be sent again). Strings are written
// as package jsontext writes them: the output is always valid JSON, even for
// keys with control characters or invalid UTF-8 (each invalid byte becomes
// U+FFFD).
// AppendJSON does not allocate when dst has room; it panics if Names and
// Values differ in length, which is a bug in the caller.
func AppendJSON(dst []byte, deviceID string, r *Result) []byte {
	if len(r.Names) != len(r.Values) {
		panic(fmt.Sprintf("record: result of pipeline %q has %d names but %d values", r.Pipeline, len(r.Names), len(r.Values)))
	}
	dst = appendIDHead(dst, deviceID, r)
	dst = strconv.AppendInt(dst, r.Start, 10)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, r.End, 10)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(r.Firing), 10)

	dst = appendPipelineKey(dst, r)
	dst = append(dst, `,"window_start":"`...)
	dst = appendTimestamp(dst, r.Start)
	dst = append(dst, `","window_end":"`...)
	dst = appendTimestamp(dst, r.End)
	dst = append(dst, `","window_start_ms":`...)
	dst = strconv.AppendInt(dst, r.Start, 10)
	dst = append(dst, `,"window_end_ms":`...)
	dst = strconv.AppendInt(dst, r.End, 10)
	dst = append(dst, `,"kind":`...)
	dst = jsontext.AppendString(dst, r.Kind)
	dst = append(dst, `,"firing":`...)
	dst = strconv.AppendInt(dst, int64(r.Firing), 10)
	if r.Definition != "" {
		dst = append(dst, `,"definition":`...)
		dst = jsontext.AppendString(dst, r.Definition)
	}
	for i, name := range r.Names {
		dst = append(dst, ',')
		dst = jsontext.AppendString(dst, name)
		dst = append(dst, ':')
		dst = jsontext.AppendNumber(dst, r.Values[i])
	}
	return append(dst, '}')
}

// appendIDHead opens a record and its id: {"id":"<deviceID>/<pipeline>/<key>/
func appendIDHead(dst []byte, deviceID string, r *Result) []byte {
	dst = append(dst, `{"id":"`...)
	dst = jsontext.AppendEscaped(dst, deviceID)
	dst = append(dst, '/')
	dst = jsontext.AppendEscaped(dst, r.Pipeline)
	dst = append(dst, '/')
	dst = jsontext.AppendEscapedBytes(dst, r.Key)
	return append(dst, '/')
}

// appendPipelineKey closes the id and adds the pipeline and key fields.
func appendPipelineKey(dst []byte, r *Result) []byte {
	dst = append(dst, `","pipeline":`...)
	dst = jsontext.AppendString(dst, r.Pipeline)
	dst = append(dst, `,"key":"`...)
	dst = jsontext.AppendEscapedBytes(dst, r.Key)
	return append(dst, '"')
}

// appendTimestamp appends ms as time.UnixMilli(ms).UTC().AppendFormat(dst,
// timeLayout) does, by hand for years 0–9999 (twice as fast: formatting the
// two times was half of AppendJSON's cost) and through AppendFormat otherwise.
func appendTimestamp(dst []byte, ms int64) []byte {
	t := time.UnixMilli(ms).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, timeLayout)
	}
	hour, minute, second := t.Clock()
	milli := t.Nanosecond() / 1e6
	return append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+second/10), byte('0'+second%10), '.',
		byte('0'+milli/100), byte('0'+milli/10%10), byte('0'+milli%10), 'Z')
}
