package sink

import (
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/jsontext"
)

// KindReport is the kind of the record of a reading report_by_exception
// reported.
const KindReport = "report"

// AppendSignalJSON appends the record of one signal of a per-key block
// (operators/keyed.Signal), in the conventions of AppendReadingJSON: r
// gives Pipeline, Key, Kind (the signal's kind), Start (the signal's time)
// and Firing (the signal's Seq, which numbers the signals of one block and
// key from 0); block names the block; names and values are its fields
// (report_by_exception: value, then the map fields). The fields, in this
// order:
//
//	id          "<deviceID>/<pipeline>/<key>/<block>/<kind>/<time_ms>/<seq>":
//	            deterministic, so a consumer can drop a record a restored
//	            epoch sends again
//	pipeline, key
//	time        RFC 3339 UTC with milliseconds
//	time_ms     the time as an integer
//	kind        r.Kind
//	<names[i]>  values[i], as AppendReadingJSON writes them
func AppendSignalJSON(dst []byte, deviceID string, r *Result, block string, names []string, values []event.Value) []byte {
	dst = appendIDHead(dst, deviceID, r)
	dst = jsontext.AppendEscaped(dst, block)
	dst = append(dst, '/')
	dst = append(dst, r.Kind...)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, r.Start, 10)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(r.Firing), 10)
	dst = appendPipelineKey(dst, r)
	dst = appendTime(dst, r.Start)
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, r.Kind...)
	dst = append(dst, '"')
	return appendFields(dst, names, values)
}
