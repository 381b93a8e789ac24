package decode

import "github.com/eddy-edge/eddy/operators/event"

// Decoder fills a Record's slots from its payload.
type Decoder interface {
	// Decode fills rec.Fields (already Reset to schema.Len() slots, rec.Payload
	// holds the message) from rec.Payload. Slots whose path is absent stay
	// Missing. It returns a *Error on malformed input; rec may then be
	// partially filled. String values alias rec.Payload or rec.Scratch (which
	// Decode appends to) and live as long as the Record's current reading.
	Decode(rec *event.Record) error
}
