// Package event defines the record that flows through an Eddy pipeline.
//
// A pipeline reads only the fields its configuration names (the timestamp
// field, the key, filter and map expressions, aggregate arguments). Those
// field paths are registered once, when the pipeline is built, in a Schema
// that gives each path a slot. Decoders fill the slots of a Record; compiled
// expressions read and write slots by index. Nothing on the per-reading path
// allocates: Records are reused, and string values alias the record's payload
// or its scratch buffer.
package event

import (
	"strconv"
	"strings"
)

// Kind is the type of a Value. The zero Kind is Missing: a field the message
// did not contain.
type Kind uint8

const (
	Missing Kind = iota // the field is absent from the message
	Null                // the field is present and null
	Number              // Num holds the value
	String              // Str holds the value
	Bool                // Num holds 1 (true) or 0 (false)
)

func (k Kind) String() string {
	switch k {
	case Missing:
		return "missing"
	case Null:
		return "null"
	case Number:
		return "number"
	case String:
		return "string"
	case Bool:
		return "bool"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one field of a Record.
//
// Str aliases memory owned by the Record (its Payload or scratch buffer): it is
// valid until the Record is reset or reused, and must be copied to be kept.
type Value struct {
	Kind Kind
	Num  float64
	Str  []byte
}

// IsNull reports whether the value is missing or null.
func (v Value) IsNull() bool { return v.Kind == Missing || v.Kind == Null }

// Truth reports whether v is the boolean true.
func (v Value) Truth() bool { return v.Kind == Bool && v.Num != 0 }

// NumberValue returns a Number value.
func NumberValue(f float64) Value { return Value{Kind: Number, Num: f} }

// BoolValue returns a Bool value.
func BoolValue(b bool) Value {
	if b {
		return Value{Kind: Bool, Num: 1}
	}
	return Value{Kind: Bool}
}

// StringValue returns a String value aliasing b.
func StringValue(b []byte) Value { return Value{Kind: String, Str: b} }

// AppendText appends the value as text: strings as they are, numbers in the
// shortest form that round-trips, bools as true/false, null and missing as
// "null". Used for keys and templates.
func (v Value) AppendText(dst []byte) []byte {
	switch v.Kind {
	case String:
		return append(dst, v.Str...)
	case Number:
		return strconv.AppendFloat(dst, v.Num, 'f', -1, 64)
	case Bool:
		return strconv.AppendBool(dst, v.Num != 0)
	}
	return append(dst, "null"...)
}

// Path is a field path such as ["payload", "sensor", "temp"]
// (written payload.sensor.temp in configuration).
type Path []string

func (p Path) String() string { return strings.Join(p, ".") }

// Schema assigns a slot to every field path a pipeline reads or writes.
// It is built once, before any record flows, and is read-only afterwards:
// concurrent readers are safe, Slot is not safe once records flow.
type Schema struct {
	paths []Path
	index map[string]int
}

// NewSchema returns an empty schema.
func NewSchema() *Schema { return &Schema{index: map[string]int{}} }

// Slot returns the slot of path, registering it if it is new.
func (s *Schema) Slot(path Path) int {
	k := path.String()
	if i, ok := s.index[k]; ok {
		return i
	}
	i := len(s.paths)
	s.paths = append(s.paths, append(Path(nil), path...))
	s.index[k] = i
	return i
}

// Lookup returns the slot of path, or -1 if it is not registered.
func (s *Schema) Lookup(path Path) int {
	if i, ok := s.index[path.String()]; ok {
		return i
	}
	return -1
}

// Len is the number of slots.
func (s *Schema) Len() int { return len(s.paths) }

// Paths returns the registered paths in slot order. The caller must not
// modify the result.
func (s *Schema) Paths() []Path { return s.paths }

// Record is one reading on its way through a pipeline.
//
// A Record is reused: Reset clears it for the next reading while keeping its
// buffers, so steady-state decoding allocates nothing.
type Record struct {
	// Fields holds one value per Schema slot.
	Fields []Value
	// Time is the record's timestamp in milliseconds since the Unix epoch:
	// event time when the pipeline has a timestamp, else processing time.
	Time int64
	// Key is the key-by value as text; KeyGroup is derived from it.
	Key      []byte
	KeyGroup uint16
	// Topic and Payload are the message as received (Payload is needed for
	// dead-lettering). They are owned by the record.
	Topic   []byte
	Payload []byte
	// Props are the message's MQTT 5 content type and user properties, as
	// the PUBLISH encodes them (source.Message.Props); empty for others.
	// Owned by the record.
	Props []byte
	// Offset is the record's position in its source (the ingest log offset
	// once that exists; a line number for files).
	Offset uint64

	// Scratch holds bytes that Values alias when they cannot alias Payload
	// (unescaped JSON strings, computed strings). Decoders append to it.
	Scratch []byte

	// Keyed holds the results of the per-key function calls (prev,
	// changed, ...) of the reading, one per call of the pipeline's
	// expr.KeyedCalls, set by the keyed operator before the expressions
	// that read them are evaluated. Reset keeps it as it is.
	Keyed []Value
	// Control holds the control values captured for the reading when it
	// arrived (expr.ControlPaths), set by the keyed stage before its
	// expressions run. Reset keeps it as it is.
	Control []Value
}

// Reset prepares r to hold a reading of a schema with n slots.
func (r *Record) Reset(n int) {
	if cap(r.Fields) < n {
		r.Fields = make([]Value, n)
	} else {
		r.Fields = r.Fields[:n]
		clear(r.Fields)
	}
	r.Time = 0
	r.Key = r.Key[:0]
	r.KeyGroup = 0
	r.Topic = r.Topic[:0]
	r.Payload = r.Payload[:0]
	r.Props = r.Props[:0]
	r.Offset = 0
	r.Scratch = r.Scratch[:0]
}
