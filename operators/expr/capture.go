package expr

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// ControlPaths collects the control paths that programs evaluated away
// from the control state read (Options.ControlCapture): the keyed
// subtasks of a pipeline evaluate a reading after its event-time buffer,
// on another goroutine, so the prepare stage captures these values when
// the reading arrives (AppendCapture) and the keyed stage reads them back from
// that vector (Decode into Record.Control).
//
// The vector names each path, so a vector captured under another list
// (a reading buffered across a reload that changed the expressions) still
// reads right: a path it lacks is missing.
type ControlPaths struct {
	paths [][]string
	// names are the encoded paths, as the vector holds them.
	names [][]byte
}

// Len returns the number of paths.
func (c *ControlPaths) Len() int { return len(c.paths) }

// Paths returns the paths, in the order of Record.Control.
func (c *ControlPaths) Paths() [][]string { return c.paths }

// index returns the index of path, adding it if new.
func (c *ControlPaths) index(path []string) int {
	name := appendPathName(nil, path)
	for i, n := range c.names {
		if string(n) == string(name) {
			return i
		}
	}
	c.paths = append(c.paths, path)
	c.names = append(c.names, name)
	return len(c.paths) - 1
}

func appendPathName(dst []byte, path []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(path)))
	for _, s := range path {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// Value tags of the vector (stable: vectors are checkpointed).
const (
	capMissing = 0
	capNumber  = 1
	capString  = 2
	capBool    = 3
)

// AppendCapture appends the vector of st's values at the paths: count,
// then per path its name and value. A caller keeps the result while
// st.Version stays (control messages are rare), so a reading costs only
// the copy of it.
func (c *ControlPaths) AppendCapture(v []byte, st *control.State) []byte {
	v = binary.AppendUvarint(v, uint64(len(c.paths)))
	for i, p := range c.paths {
		v = append(v, c.names[i]...)
		x := st.Lookup(p)
		switch x.Kind {
		case event.Number:
			v = binary.BigEndian.AppendUint64(append(v, capNumber), math.Float64bits(x.Num))
		case event.String:
			v = binary.AppendUvarint(append(v, capString), uint64(len(x.Str)))
			v = append(v, x.Str...)
		case event.Bool:
			v = append(v, capBool, byte(x.Num))
		default:
			v = append(v, capMissing)
		}
	}
	return v
}

var errVector = errors.New("expr: corrupt control vector")

// Decode reads vector vec (AppendCapture's) into dst, one value per path
// (missing where vec has none), and returns it. Strings alias vec. An
// empty vec is a reading captured without control values: all missing.
func (c *ControlPaths) Decode(vec []byte, dst []event.Value) ([]event.Value, error) {
	dst = append(dst[:0], make([]event.Value, len(c.paths))...)
	if len(vec) == 0 {
		return dst, nil
	}
	n, k := binary.Uvarint(vec)
	if k <= 0 {
		return dst, errVector
	}
	vec = vec[k:]
	for j := uint64(0); j < n; j++ {
		// The name: its segments, length-prefixed.
		start := vec
		segs, k := binary.Uvarint(vec)
		if k <= 0 {
			return dst, errVector
		}
		vec = vec[k:]
		for s := uint64(0); s < segs; s++ {
			l, k := binary.Uvarint(vec)
			if k <= 0 || l > uint64(len(vec)-k) {
				return dst, errVector
			}
			vec = vec[k+int(l):]
		}
		name := start[:len(start)-len(vec)]
		if len(vec) == 0 {
			return dst, errVector
		}
		var x event.Value
		tag := vec[0]
		vec = vec[1:]
		switch tag {
		case capMissing:
		case capNumber:
			if len(vec) < 8 {
				return dst, errVector
			}
			x = event.NumberValue(math.Float64frombits(binary.BigEndian.Uint64(vec)))
			vec = vec[8:]
		case capString:
			l, k := binary.Uvarint(vec)
			if k <= 0 || l > uint64(len(vec)-k) {
				return dst, errVector
			}
			x = event.StringValue(vec[k : k+int(l) : k+int(l)])
			vec = vec[k+int(l):]
		case capBool:
			if len(vec) < 1 {
				return dst, errVector
			}
			x = event.BoolValue(vec[0] != 0)
			vec = vec[1:]
		default:
			return dst, errVector
		}
		// Mostly the same list in the same order: try position j first.
		if i := int(j); i < len(c.names) && string(c.names[i]) == string(name) {
			dst[i] = x
			continue
		}
		for i, nm := range c.names {
			if string(nm) == string(name) {
				dst[i] = x
			}
		}
	}
	return dst, nil
}

// captureRef compiles a control reference of a program evaluated away
// from the control state: a read of Record.Control at the path's index.
// Its path must be constant: the captured vector holds values, not the
// state's objects a key computed per reading would index.
func (c *compiler) captureRef(e hclsyntax.Expression, steps []controlStep) node {
	rng := e.Range()
	static := staticPath(steps)
	if static == nil {
		c.errorf(rng, "Computed control key in per-key expressions",
			"In a pipeline with per-key state, expressions read the control values captured when the reading arrived, so a control path must be constant, as in control.limit or control.limit[\"d1\"]; a key computed per reading (control.limit[event.device]) cannot be captured. Name the value with a constant path instead.")
		return bad(rng)
	}
	c.readsControl = true
	i := c.capture.index(static)
	return node{typ: typeAny, rng: rng, slot: -1, control: true, eval: func(rec *event.Record) event.Value {
		if i < len(rec.Control) {
			return rec.Control[i]
		}
		return event.Value{}
	}}
}
