package sparkplug

import (
	"strconv"

	"github.com/eddy-edge/eddy/operators/jsontext"
)

// The fields of a reading as a JSON object (AppendReadingJSON), which a
// pipeline's expressions read.
const (
	FieldGroup      = "group"         // the Sparkplug group id
	FieldNode       = "node"          // the edge node id
	FieldDevice     = "device"        // the device id, "" for a node's own metric
	FieldMetric     = "metric"        // the metric's name, resolved from the births
	FieldValue      = "value"         // number, boolean, string, or null
	FieldDatatype   = "datatype"      // the Sparkplug datatype's name, e.g. "Double"
	FieldTimestamp  = "timestamp"     // Unix ms: the metric's, else the payload's
	FieldHistorical = "is_historical" // the edge node sent it late, from its store
	FieldStale      = "stale"         // the last value of a dead node or device
)

// AppendReadingJSON appends rd as one JSON object with the Field… names,
// the form in which a Sparkplug reading enters a pipeline: the same
// decoder, expressions, dead letters and keyed state as any JSON reading.
// Integers are written exactly (a pipeline reads them as float64, exact
// up to 2^53); bytes and values of an unsupported type are null. The
// timestamp is left out when the message had none (0), so the reading is
// dead-lettered missing_timestamp rather than stamped 1970.
func AppendReadingJSON(dst []byte, rd *Reading) []byte {
	dst = append(dst, `{"group":`...)
	dst = jsontext.AppendString(dst, rd.Group)
	dst = append(dst, `,"node":`...)
	dst = jsontext.AppendString(dst, rd.Node)
	dst = append(dst, `,"device":`...)
	dst = jsontext.AppendString(dst, rd.Device)
	dst = append(dst, `,"metric":`...)
	dst = jsontext.AppendStringBytes(dst, rd.Name)
	dst = append(dst, `,"value":`...)
	dst = appendValueJSON(dst, rd)
	dst = append(dst, `,"datatype":"`...)
	dst = append(dst, rd.Datatype.String()...)
	dst = append(dst, '"')
	if rd.Timestamp != 0 {
		dst = append(dst, `,"timestamp":`...)
		dst = strconv.AppendUint(dst, rd.Timestamp, 10)
	}
	dst = append(dst, `,"is_historical":`...)
	dst = strconv.AppendBool(dst, rd.Historical)
	dst = append(dst, `,"stale":`...)
	dst = strconv.AppendBool(dst, rd.Stale)
	return append(dst, '}')
}

func appendValueJSON(dst []byte, rd *Reading) []byte {
	v := rd.Value
	if rd.IsNull {
		return append(dst, "null"...)
	}
	switch v.Kind {
	case KindInt:
		if rd.Datatype == TypeInt8 || rd.Datatype == TypeInt16 || rd.Datatype == TypeInt32 {
			return strconv.AppendInt(dst, v.Int(rd.Datatype), 10)
		}
		return strconv.AppendUint(dst, uint64(uint32(v.Bits)), 10)
	case KindLong:
		if rd.Datatype == TypeInt64 {
			return strconv.AppendInt(dst, int64(v.Bits), 10)
		}
		return strconv.AppendUint(dst, v.Bits, 10)
	case KindFloat, KindDouble:
		return jsontext.AppendNumber(dst, v.Float64())
	case KindBool:
		return strconv.AppendBool(dst, v.Bits != 0)
	case KindString:
		return jsontext.AppendStringBytes(dst, v.Str)
	}
	return append(dst, "null"...)
}
