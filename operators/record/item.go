package record

// Item is one thing to deliver: its encoded JSON payload (one object, no
// newline) and, for window firings, the Result it was encoded from. Result
// is nil for anything else (dead letters, late readings); sinks then use the
// payload alone.
type Item struct {
	Payload []byte
	Result  *Result
}
