package sparkplug

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"

	"github.com/eddy-edge/eddy/operators/record"
)

// resultJSON reads back a window result from its JSON encoding
// (record.AppendJSON): the key, the window, and the aggregates in the
// order written, which is the configuration's. It is the slow path of
// results released at the end of a bounded input; it keeps the last names
// so that a device's results share one slice.
type resultJSON struct {
	r     record.Result
	names []string
}

var errNotResult = errors.New("sparkplug: the sink publishes window results only, and this record is not one (a pipeline without a window cannot feed it)")

// fixedFields are the fields of a result that are not aggregates.
var fixedFields = []string{"id", "pipeline", "key", "window_start", "window_end", "window_start_ms", "window_end_ms", "kind", "firing", "definition"}

func (j *resultJSON) decode(payload []byte) (*record.Result, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotResult
	}
	j.r = record.Result{Names: j.r.Names[:0], Values: j.r.Values[:0]}
	var names []string
	hasEnd := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errNotResult
		}
		name, _ := tok.(string)
		if tok, err = dec.Token(); err != nil {
			return nil, errNotResult
		}
		switch name {
		case "key":
			s, _ := tok.(string)
			j.r.Key = append(j.r.Key[:0], s...)
		case "window_start_ms", "window_end_ms":
			n, ok := tok.(json.Number)
			v, err := n.Int64()
			if !ok || err != nil {
				return nil, errNotResult
			}
			if name == "window_end_ms" {
				j.r.End, hasEnd = v, true
			} else {
				j.r.Start = v
			}
		case "kind":
			if s, _ := tok.(string); s == record.KindReading {
				return nil, errNotResult
			}
		default:
			if slices.Contains(fixedFields, name) {
				continue
			}
			v := math.NaN() // null: no value
			switch x := tok.(type) {
			case json.Number:
				if v, err = x.Float64(); err != nil {
					return nil, errNotResult
				}
			case nil:
			default:
				return nil, errNotResult
			}
			names = append(names, name)
			j.r.Values = append(j.r.Values, v)
		}
	}
	if !hasEnd {
		return nil, errNotResult
	}
	if !slices.Equal(names, j.names) {
		j.names = names
	}
	j.r.Names = j.names
	return &j.r, nil
}
