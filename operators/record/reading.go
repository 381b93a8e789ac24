package record

import (
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/jsontext"
)

// KindReading is the kind of the record of one reading, which a pipeline
// with per-key functions and no window emits.
const KindReading = "reading"

// AppendReadingJSON appends the record of one reading of a pipeline with
// per-key functions and no window, in the conventions of AppendJSON: r
// gives Pipeline, Key, Start (the reading's time) and Seq; names and
// values are the map fields, in config order, as the expressions gave
// them. The fields, in this order:
//
//	id          "<deviceID>/<pipeline>/<key>/<time_ms>/<seq>": deterministic, so a
//	            consumer can drop a record a restored epoch sends again
//	pipeline, key
//	time        RFC 3339 UTC with milliseconds
//	time_ms     the time as an integer
//	kind        "reading"
//	<names[i]>  values[i]: a number (NaN, ±Inf → null), string, bool or null
func AppendReadingJSON(dst []byte, deviceID string, r *Result, names []string, values []event.Value) []byte {
	dst = appendIDHead(dst, deviceID, r)
	dst = strconv.AppendInt(dst, r.Start, 10)
	dst = append(dst, '/')
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = appendPipelineKey(dst, r)
	dst = appendInstant(dst, "time", r.Start)
	dst = append(dst, `,"kind":"reading"`...)
	return appendFields(dst, names, values)
}

// appendFields appends the fields names[i]: values[i], then closes the
// record.
func appendFields(dst []byte, names []string, values []event.Value) []byte {
	for i, name := range names {
		dst = append(dst, ',')
		dst = jsontext.AppendString(dst, name)
		dst = append(dst, ':')
		v := values[i]
		switch v.Kind {
		case event.Number:
			dst = jsontext.AppendNumber(dst, v.Num)
		case event.String:
			dst = jsontext.AppendStringBytes(dst, v.Str)
		case event.Bool:
			dst = strconv.AppendBool(dst, v.Num != 0)
		default:
			dst = append(dst, "null"...)
		}
	}
	return append(dst, '}')
}
