package decode

// Reasons a reading fails to decode. Each is a short, stable identifier used
// as a metric label and in dead letters; never change a published one.
const (
	ReasonMalformedJSON    = "malformed_json"    // the payload is not a JSON object
	ReasonMalformedCSV     = "malformed_csv"     // the payload is not one CSV record of the expected width
	ReasonMissingTimestamp = "missing_timestamp" // the timestamp field is absent or null
	ReasonBadTimestamp     = "bad_timestamp"     // the timestamp field does not parse or is out of range
	ReasonFutureTimestamp  = "future_timestamp"  // reserved for the watermark stage (max_future_skew)
	ReasonWrongType        = "wrong_type"        // a value cannot be held as the type it must have
)

// Error is a reading-level decode failure: the reading is dead-lettered with
// Reason, and the pipeline goes on. Reason is one of the Reason constants;
// Detail is a human-readable sentence (with a byte offset where one applies).
type Error struct {
	Reason string
	Detail string
}

// Error returns "decode: <reason>: <detail>".
func (e *Error) Error() string {
	if e.Detail == "" {
		return "decode: " + e.Reason
	}
	return "decode: " + e.Reason + ": " + e.Detail
}
