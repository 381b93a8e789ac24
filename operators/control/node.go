package control

import (
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"

	"github.com/eddy-edge/eddy/operators/jsontext"
)

// Node is a position in a State: an object, a leaf, or nothing (a path
// that does not exist; the zero Node is one). Walking with Field and
// FieldBytes does not allocate.
//
// A Node is valid until the next change of its State (see
// State.Version); after one it may show data the change removed, so walk
// again from Root.
type Node struct {
	s *State
	e *entry
}

// Root returns the top-level object.
func (s *State) Root() Node { return Node{s: s, e: s.root} }

// Field returns the member name of the object n, or nothing when n is
// not an object or has no such member.
func (n Node) Field(name string) Node {
	if n.e == nil || n.e.members == nil {
		return Node{}
	}
	return Node{s: n.s, e: n.e.members[name]}
}

// FieldBytes is Field with the name as bytes, such as a field of a
// reading. It does not allocate (the map lookup converts without
// copying).
func (n Node) FieldBytes(name []byte) Node {
	if n.e == nil || n.e.members == nil {
		return Node{}
	}
	return Node{s: n.s, e: n.e.members[string(name)]}
}

// Exists reports whether n is in the state.
func (n Node) Exists() bool { return n.e != nil }

// IsObject reports whether n is an object.
func (n Node) IsObject() bool { return n.e != nil && n.e.members != nil }

// Value returns n as an event.Value, as the JSON decoder reads fields:
// nothing is Missing; numbers, strings and bools are themselves; arrays
// and objects are Strings holding their canonical JSON text.
//
// The bytes of a String are owned by the State and never modified: they
// stay valid after later changes, and the caller must not modify them.
// Value allocates only the first time an object's text is read after a
// change (it is cached until the next one); leaves never allocate.
func (n Node) Value() event.Value {
	e := n.e
	switch {
	case e == nil:
		return event.Value{}
	case e.members == nil:
		return e.value
	case e.value.Kind == event.Missing:
		e.value = event.StringValue(e.appendJSON(nil))
		n.s.cached = append(n.s.cached, e)
	}
	return e.value
}

// Lookup returns the value at path (control.a.b is path ["a", "b"]), or
// a Missing Value when there is none. See Node.Value for the result.
func (s *State) Lookup(path []string) event.Value {
	n := s.Root()
	for _, name := range path {
		n = n.Field(name)
	}
	return n.Value()
}

// Index returns the value at path followed by key, a key that comes from
// a reading at run time (control.threshold[event.device] is path
// ["threshold"] and the device's bytes). It does not allocate, except as
// Node.Value says.
func (s *State) Index(path []string, key []byte) event.Value {
	n := s.Root()
	for _, name := range path {
		n = n.Field(name)
	}
	return n.FieldBytes(key).Value()
}

// appendLeaf appends a leaf's canonical JSON.
func appendLeaf(dst []byte, e *entry) []byte {
	v := e.value
	switch v.Kind {
	case event.Number:
		return jsontext.AppendNumber(dst, v.Num)
	case event.String:
		if e.array {
			return append(dst, v.Str...)
		}
		return jsontext.AppendStringBytes(dst, v.Str)
	case event.Bool:
		return strconv.AppendBool(dst, v.Num != 0)
	}
	return append(dst, "null"...)
}
