package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/eddy-edge/eddy/operators/event"

	"github.com/eddy-edge/eddy/operators/jsontext"
)

// patch is a parsed control message: an object whose members are merged
// into the state. A member is an object to merge (members non-nil), a
// leaf that replaces (value), or a deletion (value of Kind Null).
type patch struct {
	members map[string]*patch
	value   event.Value
	// array marks a leaf whose value.Str is an array's canonical JSON text.
	array bool
}

// parsePatch parses payload, which must be exactly one JSON object.
// Control messages arrive at a low rate, so parsing uses encoding/json
// and allocates freely; only lookups are on the per-reading path.
func parsePatch(payload []byte) (*patch, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, malformed(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, malformed(err)
		}
		return nil, fmt.Errorf("%w: data after the top-level object", ErrMalformed)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the message must be a JSON object, got %s", ErrMalformed, jsonType(doc))
	}
	return objectPatch(obj, 1)
}

func malformed(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: invalid JSON at byte %d: %w", ErrMalformed, se.Offset, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated or empty JSON: %w", ErrMalformed, err)
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

func objectPatch(obj map[string]any, depth int) (*patch, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d levels", ErrMalformed, MaxDepth)
	}
	p := &patch{members: make(map[string]*patch, len(obj))}
	for k, v := range obj {
		var q *patch
		switch v := v.(type) {
		case map[string]any:
			var err error
			if q, err = objectPatch(v, depth+1); err != nil {
				return nil, err
			}
		case []any:
			text, err := appendArray(nil, v, depth+1)
			if err != nil {
				return nil, err
			}
			q = &patch{value: event.StringValue(text), array: true}
		case nil:
			q = &patch{value: event.Value{Kind: event.Null}}
		case string:
			q = &patch{value: event.StringValue([]byte(v))}
		case bool:
			q = &patch{value: event.BoolValue(v)}
		case json.Number:
			f, err := parseNumber(v)
			if err != nil {
				return nil, err
			}
			q = &patch{value: event.NumberValue(f)}
		default:
			return nil, fmt.Errorf("%w: unexpected JSON value %T", ErrMalformed, v)
		}
		p.members[k] = q
	}
	return p, nil
}

func parseNumber(n json.Number) (float64, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, fmt.Errorf("%w: number %s does not fit a 64-bit float", ErrMalformed, n)
	}
	return f, nil
}

// appendArray appends the canonical JSON text of an array (see
// appendCanonical), which is how the state holds arrays: as leaves.
func appendArray(dst []byte, a []any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d levels", ErrMalformed, MaxDepth)
	}
	dst = append(dst, '[')
	for i, v := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendCanonical(dst, v, depth); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendCanonical appends v, a value decoded by encoding/json with
// UseNumber, in canonical form: no spaces, object keys sorted, numbers
// and strings written as Snapshot writes them.
func appendCanonical(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case map[string]any:
		if depth+1 > MaxDepth {
			return nil, fmt.Errorf("%w: nested deeper than %d levels", ErrMalformed, MaxDepth)
		}
		dst = append(dst, '{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(jsontext.AppendString(dst, k), ':')
			var err error
			if dst, err = appendCanonical(dst, v[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		return appendArray(dst, v, depth+1)
	case nil:
		return append(dst, "null"...), nil
	case string:
		return jsontext.AppendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case json.Number:
		f, err := parseNumber(v)
		if err != nil {
			return nil, err
		}
		return jsontext.AppendNumber(dst, f), nil
	}
	return nil, fmt.Errorf("%w: unexpected JSON value %T", ErrMalformed, v)
}

func jsonType(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
