package record

import (
	"strconv"

	"github.com/eddy-edge/eddy/operators/jsontext"
)

// Reasons for dead letters written by Eddy's stages. Other stages may use
// their own; these are the ones the sinks' readers can rely on.
const (
	ReasonLate = "late" // a reading no window accepts any more (t + lateness ≤ watermark)
)

// AppendDeadLetter appends one JSON object (no trailing newline) describing
// a message that was not processed:
//
//	{"pipeline":…,"reason":…,"detail":…,"topic":…,"offset":…,"payload":…}
//
// offset is the message's position in the ingest log. payload is the
// original message as a JSON string: valid UTF-8 text round-trips exactly;
// bytes that are not valid UTF-8 are each replaced by U+FFFD, so binary
// garbage still yields valid JSON (but cannot be recovered byte for byte).
// It does not allocate when dst has room.
func AppendDeadLetter(dst []byte, pipeline, reason, detail, topic string, offset uint64, payload []byte) []byte {
	dst = append(dst, `{"pipeline":`...)
	dst = jsontext.AppendString(dst, pipeline)
	dst = append(dst, `,"reason":`...)
	dst = jsontext.AppendString(dst, reason)
	dst = append(dst, `,"detail":`...)
	dst = jsontext.AppendString(dst, detail)
	dst = append(dst, `,"topic":`...)
	dst = jsontext.AppendString(dst, topic)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendUint(dst, offset, 10)
	dst = append(dst, `,"payload":"`...)
	dst = jsontext.AppendEscapedBytes(dst, payload)
	return append(dst, `"}`...)
}
