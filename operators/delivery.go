package operators

import (
	"github.com/eddy-edge/eddy/operators/sink"
)

// Delivery is a batch of encoded items bound for sinks. It owns all the
// memory its items point into, so it can cross goroutines; sinks only read
// it, so one Delivery may go to several sinks.
type Delivery struct {
	buf     []byte
	ends    []int
	keys    []byte
	keyEnds []int
	vals    []float64
	results []sink.Result
	isRes   []bool
	items   []sink.Item
}

// Len is the number of items added.
func (d *Delivery) Len() int { return len(d.ends) }

// AddResult encodes r for deviceID and keeps a copy of r for topic templates
// and pretty printing.
func (d *Delivery) AddResult(deviceID string, r *sink.Result) {
	d.buf = sink.AppendJSON(d.buf, deviceID, r)
	d.ends = append(d.ends, len(d.buf))
	d.keys = append(d.keys, r.Key...)
	d.keyEnds = append(d.keyEnds, len(d.keys))
	d.vals = append(d.vals, r.Values...)
	c := *r
	c.Key, c.Values = nil, nil
	d.results = append(d.results, c)
	d.isRes = append(d.isRes, true)
}

// AddEncoded adds a result whose JSON encoding is already done.
func (d *Delivery) AddEncoded(payload []byte, r *sink.Result) {
	d.buf = append(d.buf, payload...)
	d.ends = append(d.ends, len(d.buf))
	d.keys = append(d.keys, r.Key...)
	d.keyEnds = append(d.keyEnds, len(d.keys))
	d.vals = append(d.vals, r.Values...)
	c := *r
	c.Key, c.Values = nil, nil
	d.results = append(d.results, c)
	d.isRes = append(d.isRes, true)
}

// AddDeadLetter encodes a dead letter or late reading.
func (d *Delivery) AddDeadLetter(pipeline, reason, detail, topic string, offset uint64, payload []byte) {
	d.buf = sink.AppendDeadLetter(d.buf, pipeline, reason, detail, topic, offset, payload)
	d.ends = append(d.ends, len(d.buf))
	d.keyEnds = append(d.keyEnds, len(d.keys))
	d.results = append(d.results, sink.Result{})
	d.isRes = append(d.isRes, false)
}

// AddRaw adds a payload as it is (a pipeline without a window forwards the
// readings that pass its filter).
func (d *Delivery) AddRaw(payload []byte) {
	d.buf = append(d.buf, payload...)
	d.ends = append(d.ends, len(d.buf))
	d.keyEnds = append(d.keyEnds, len(d.keys))
	d.results = append(d.results, sink.Result{})
	d.isRes = append(d.isRes, false)
}

// Items returns the items, valid as long as d is. Call it once all items
// are added: adding more afterwards invalidates earlier results.
func (d *Delivery) Items() []sink.Item {
	if len(d.items) == len(d.ends) {
		return d.items
	}
	d.items = d.items[:0]
	start, kstart, vstart := 0, 0, 0
	for i, end := range d.ends {
		it := sink.Item{Payload: d.buf[start:end:end]}
		if d.isRes[i] {
			r := &d.results[i]
			r.Key = d.keys[kstart:d.keyEnds[i]:d.keyEnds[i]]
			n := len(r.Names)
			r.Values = d.vals[vstart : vstart+n : vstart+n]
			vstart += n
			it.Result = r
		}
		kstart = d.keyEnds[i]
		start = end
		d.items = append(d.items, it)
	}
	return d.items
}
