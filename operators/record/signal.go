package record

import (
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/jsontext"
)

// KindReport is the kind of the record of a reading report_by_exception
// reported.
const KindReport = "report"

// Span is the episode a signal is about (an alarm's): when it started and,
// once over, when it ended. The zero Span is none.
//
// With ByReading (a processing-time block's signal, whose times differ
// from run to run) the id names the reading the signal derives from
// instead of the signal's time and seq: "…/<kind>/o<From>/<N>", From being
// that reading's source offset and N the signal's number among those of
// its kind derived from it (operators/keyed.Signal).
type Span struct {
	Start, End       int64 // Unix ms
	HasStart, HasEnd bool
	ByReading        bool
	From             uint64
	N                uint32
}

// AppendSignalJSON appends the record of one signal of a per-key block
// (operators/keyed.Signal), in the conventions of AppendReadingJSON: r
// gives Pipeline, Key, Kind (the signal's kind), Start (the signal's time)
// and Seq (the signal's Seq, which numbers the signals of one block and
// key from 0); block names the block; span is the signal's episode;
// names and values are its fields (report_by_exception: value, then the
// map fields; alarm: the map fields). The fields, in this order:
//
//	id          "<deviceID>/<pipeline>/<key>/<block>/<kind>/<time_ms>/<seq>"
//	            ("…/<kind>/o<from>/<n>" with span.ByReading):
//	            deterministic, so a consumer can drop a record a restored
//	            epoch sends again
//	pipeline, key
//	time        RFC 3339 UTC with milliseconds
//	time_ms     the time as an integer
//	kind        r.Kind
//	start       with span.HasStart: span.Start, RFC 3339
//	start_ms    the same as an integer
//	end         with span.HasEnd: span.End, RFC 3339
//	end_ms      the same as an integer
//	duration_ms End − Start
//	<names[i]>  values[i], as AppendReadingJSON writes them
func AppendSignalJSON(dst []byte, deviceID string, r *Result, block string, span Span, names []string, values []event.Value) []byte {
	dst = appendIDHead(dst, deviceID, r)
	dst = jsontext.AppendEscaped(dst, block)
	dst = append(dst, '/')
	dst = append(dst, r.Kind...)
	if span.ByReading {
		dst = append(dst, "/o"...)
		dst = strconv.AppendUint(dst, span.From, 10)
		dst = append(dst, '/')
		dst = strconv.AppendUint(dst, uint64(span.N), 10)
	} else {
		dst = append(dst, '/')
		dst = strconv.AppendInt(dst, r.Start, 10)
		dst = append(dst, '/')
		dst = strconv.AppendUint(dst, r.Seq, 10)
	}
	dst = appendPipelineKey(dst, r)
	dst = appendInstant(dst, "time", r.Start)
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, r.Kind...)
	dst = append(dst, '"')
	if span.HasStart {
		dst = appendInstant(dst, "start", span.Start)
	}
	if span.HasEnd {
		dst = appendInstant(dst, "end", span.End)
		dst = append(dst, `,"duration_ms":`...)
		dst = strconv.AppendInt(dst, span.End-span.Start, 10)
	}
	return appendFields(dst, names, values)
}

// appendInstant appends the fields <name> (RFC 3339) and <name>_ms.
func appendInstant(dst []byte, name string, ms int64) []byte {
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	dst = append(dst, `":"`...)
	dst = appendTimestamp(dst, ms)
	dst = append(dst, `","`...)
	dst = append(dst, name...)
	dst = append(dst, `_ms":`...)
	return strconv.AppendInt(dst, ms, 10)
}
