package decode

import "github.com/eddy-edge/eddy/operators/event"

// rawPath is the path the raw decoder fills.
var rawPath = event.Path{"payload"}

type rawDecoder struct{ slot int }

// NewRaw returns a Decoder that puts the whole payload in the path
// "payload": a Number when the payload is a decimal number (spaces, tabs and
// line breaks around it ignored; e.g. "21.5\n"), else a String aliasing the
// payload as it is (no UTF-8 check; an empty payload is an empty String).
// If "payload" is not registered in schema, Decode fills nothing. It never
// fails, is stateless and safe for concurrent use, and allocates nothing.
func NewRaw(schema *event.Schema) Decoder {
	return rawDecoder{slot: schema.Lookup(rawPath)}
}

// Decode implements Decoder.
func (d rawDecoder) Decode(rec *event.Record) error {
	if d.slot < 0 {
		return nil
	}
	p := rec.Payload[:len(rec.Payload):len(rec.Payload)]
	i, j := 0, len(p)
	for i < j && isBlank(p[i]) {
		i++
	}
	for j > i && isBlank(p[j-1]) {
		j--
	}
	if isDecimal(p[i:j]) {
		if f, ok := parseFloat(p[i:j]); ok {
			rec.Fields[d.slot] = event.NumberValue(f)
			return nil
		}
	}
	rec.Fields[d.slot] = event.StringValue(p)
	return nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
