package decode

import (
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"
)

// linearChildren is the number of children up to which a trie node finds a
// key by comparing names in turn; above it a map is faster.
const linearChildren = 8

// pathNode is a node of the trie of registered paths: the root is the
// top-level object, a child is a key inside its parent's object.
type pathNode struct {
	name     string
	slot     int // slot of the path ending here, or -1
	children []*pathNode
	byName   map[string]*pathNode // set when len(children) > linearChildren
	// slots are the slots at or below this node. They are cleared whenever
	// the key appears, so that with duplicate keys the last one wins whole.
	slots []int
}

func (n *pathNode) child(name []byte) *pathNode {
	if n.byName != nil {
		return n.byName[string(name)] // no allocation: the compiler avoids the copy for map lookups
	}
	for _, c := range n.children {
		if c.name == string(name) {
			return c
		}
	}
	return nil
}

// jsonDecoder is stateless after construction: one may serve any number of
// goroutines.
type jsonDecoder struct {
	root  *pathNode
	width int // schema.Len() at construction
}

// NewJSON returns a Decoder for JSON objects that fills the schema's paths.
// Call it after every path is registered in schema: later paths are not seen.
//
// A path a.b.c is the key "c" of the object at key "b" of the object at key
// "a" of the top-level object; keys are compared after unescaping. Values map
// as: number → Number (float64, nearest; beyond the float64 range is
// wrong_type), string → String (unescaped; invalid UTF-8 and lone surrogates
// become U+FFFD), true/false → Bool, null → Null, object or array → String
// holding the value's raw JSON text as it appears in the payload. Arrays are
// never descended into. A path through a non-object stays Missing. With
// duplicate keys the last one wins, also for everything below it. The
// payload must be exactly one object (with optional surrounding space),
// nested at most 64 deep; everything, including unregistered parts, is
// validated (RFC 8259 grammar, escapes, no control characters in strings).
//
// Decode allocates nothing in steady state: strings alias rec.Payload when
// they have no escapes, else rec.Scratch (which grows once to the largest
// message's needs).
func NewJSON(schema *event.Schema) Decoder {
	root := &pathNode{slot: -1}
	for slot, path := range schema.Paths() {
		if len(path) == 0 {
			continue
		}
		n := root
		for _, name := range path {
			c := n.child([]byte(name))
			if c == nil {
				c = &pathNode{name: name, slot: -1}
				n.children = append(n.children, c)
				if len(n.children) > linearChildren {
					if n.byName == nil {
						n.byName = make(map[string]*pathNode, len(n.children))
						for _, c := range n.children {
							n.byName[c.name] = c
						}
					}
					n.byName[name] = c
				}
			}
			c.slots = append(c.slots, slot)
			n = c
		}
		n.slot = slot
	}
	return &jsonDecoder{root: root, width: schema.Len()}
}

// Decode implements Decoder.
func (d *jsonDecoder) Decode(rec *event.Record) error {
	if len(rec.Fields) < d.width {
		panic("decode: record has " + strconv.Itoa(len(rec.Fields)) + " slots, schema had " +
			strconv.Itoa(d.width) + " when the decoder was built: Reset the record to schema.Len()")
	}
	buf := rec.Payload
	i := skipSpace(buf, 0)
	if i >= len(buf) || buf[i] != '{' {
		return malformedJSON("top-level value is not an object", i)
	}
	i, err := d.object(rec, buf, i, d.root, 1)
	if err != nil {
		return err
	}
	if i = skipSpace(buf, i); i != len(buf) {
		return malformedJSON("data after the top-level object", i)
	}
	return nil
}

// object decodes the object at buf[i] (its '{'), which has nesting depth
// depth and whose keys are node's children, and returns the index after it.
// Recursion follows only registered paths, so it is bounded by the longest
// path as well as by maxDepth.
func (d *jsonDecoder) object(rec *event.Record, buf []byte, i int, node *pathNode, depth int) (int, error) {
	if depth > maxDepth {
		return i, malformedJSON("nesting deeper than "+strconv.Itoa(maxDepth), i)
	}
	n := len(buf)
	i = skipSpace(buf, i+1)
	if i < n && buf[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= n || buf[i] != '"' {
			return i, malformedJSON("expected object key", i)
		}
		keyStart := i + 1
		end, flags, err := scanString(buf, keyStart)
		if err != nil {
			return end, err
		}
		var child *pathNode
		if flags == 0 {
			child = node.child(buf[keyStart : end-1])
		} else {
			// Unescape into scratch just to compare, then give the space back.
			mark := len(rec.Scratch)
			var key []byte
			key, rec.Scratch = appendString(rec.Scratch, buf[keyStart:end-1], flags)
			child = node.child(key)
			rec.Scratch = rec.Scratch[:mark]
		}
		i = skipSpace(buf, end)
		if i >= n || buf[i] != ':' {
			return i, malformedJSON("expected ':'", i)
		}
		i = skipSpace(buf, i+1)
		if i >= n {
			return i, malformedJSON("unexpected end of input", i)
		}
		switch {
		case child == nil && buf[i] != '{' && buf[i] != '[':
			// What skipValue does with a scalar, without its loop over
			// containers: most unregistered values are scalars.
			i, err = skipScalar(buf, i)
		case child == nil:
			i, err = skipValue(buf, i, depth+1)
		default:
			i, err = d.value(rec, buf, i, child, depth+1)
		}
		if err != nil {
			return i, err
		}
		i = skipSpace(buf, i)
		if i >= n {
			return i, malformedJSON("unexpected end of input", i)
		}
		switch buf[i] {
		case ',':
			i = skipSpace(buf, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, malformedJSON("expected ',' or '}'", i)
		}
	}
}

// value decodes the value at buf[i] for the registered node.
func (d *jsonDecoder) value(rec *event.Record, buf []byte, i int, node *pathNode, depth int) (int, error) {
	for _, s := range node.slots {
		rec.Fields[s] = event.Value{}
	}
	start := i
	var err error
	switch c := buf[i]; {
	case c == '{' && node.children != nil:
		i, err = d.object(rec, buf, i, node, depth)
		if err == nil && node.slot >= 0 {
			rec.Fields[node.slot] = event.StringValue(buf[start:i:i])
		}
		return i, err
	case node.slot < 0:
		return skipValue(buf, i, depth)
	case c == '"':
		var flags uint8
		if i, flags, err = scanString(buf, i+1); err != nil {
			return i, err
		}
		var s []byte
		s, rec.Scratch = appendString(rec.Scratch, buf[start+1:i-1:i-1], flags)
		rec.Fields[node.slot] = event.StringValue(s)
		return i, nil
	case c == '-' || isDigit(c):
		end, f, valid, inRange := parseJSONNumber(buf, i)
		if !valid {
			return end, malformedJSON("invalid number", i)
		}
		if !inRange {
			return end, &Error{Reason: ReasonWrongType, Detail: "number beyond the float64 range at offset " + strconv.Itoa(i)}
		}
		rec.Fields[node.slot] = event.NumberValue(f)
		return end, nil
	case c == 't':
		i, err = skipLiteral(buf, i, "true")
		rec.Fields[node.slot] = event.BoolValue(true)
	case c == 'f':
		i, err = skipLiteral(buf, i, "false")
		rec.Fields[node.slot] = event.BoolValue(false)
	case c == 'n':
		i, err = skipLiteral(buf, i, "null")
		rec.Fields[node.slot] = event.Value{Kind: event.Null}
	default: // an object at a leaf, an array, or garbage
		if i, err = skipValue(buf, i, depth); err == nil {
			rec.Fields[node.slot] = event.StringValue(buf[start:i:i])
		}
	}
	return i, err
}
