package operators

import (
	"sync"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/operators/stream"
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
	results []record.Result
	isRes   []bool
	// items is built by the first Items call; itemsMu makes that safe when
	// several sinks' goroutines call it at once (each sink of a pipeline
	// gets the same Delivery).
	itemsMu sync.Mutex
	items   []record.Item

	// Sizes of the previous Delivery of the same producer, for the first
	// Add to allocate once instead of growing each buffer by doubling.
	hint deliverySizes
}

type deliverySizes struct{ buf, items, keys, vals int }

// maxHintBuf caps the preallocated encoding buffer: after a burst of
// firings the next batches are usually small.
const maxHintBuf = 4 << 20

// next returns an empty Delivery for the producer's next batch, sized like
// d with a quarter more: a batch a little larger than the last would
// otherwise grow every buffer by doubling, copying it.
func (d *Delivery) next() *Delivery {
	more := func(n, limit int) int { return min(n+n/4, limit) }
	return &Delivery{hint: deliverySizes{buf: more(len(d.buf), maxHintBuf), items: more(len(d.ends), maxHintBuf/64), keys: more(len(d.keys), maxHintBuf), vals: more(len(d.vals), maxHintBuf/8)}}
}

// reserve allocates the buffers at the first Add.
func (d *Delivery) reserve() {
	if d.ends != nil {
		return
	}
	h := d.hint
	d.buf = make([]byte, 0, max(h.buf, 512))
	d.ends = make([]int, 0, max(h.items, 8))
	d.keyEnds = make([]int, 0, max(h.items, 8))
	d.results = make([]record.Result, 0, h.items)
	d.isRes = make([]bool, 0, max(h.items, 8))
	if h.keys > 0 {
		d.keys = make([]byte, 0, h.keys)
	}
	if h.vals > 0 {
		d.vals = make([]float64, 0, h.vals)
	}
}

// Len is the number of items added.
func (d *Delivery) Len() int { return len(d.ends) }

// AddResult encodes r for deviceID and keeps a copy of r for topic templates
// and pretty printing.
func (d *Delivery) AddResult(deviceID string, r *record.Result) {
	d.reserve()
	d.buf = record.AppendJSON(d.buf, deviceID, r)
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
func (d *Delivery) AddEncoded(payload []byte, r *record.Result) {
	d.reserve()
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

// AddReading encodes the record of one reading (record.AppendReadingJSON)
// and keeps a copy of r for topic templates and ordering.
func (d *Delivery) AddReading(deviceID string, r *record.Result, names []string, values []event.Value) {
	d.reserve()
	d.buf = record.AppendReadingJSON(d.buf, deviceID, r, names, values)
	d.endRecord(r)
}

// AddSignal encodes the record of one signal of a per-key block
// (record.AppendSignalJSON) and keeps a copy of r for topic templates and
// ordering.
func (d *Delivery) AddSignal(deviceID string, r *record.Result, block string, span record.Span, names []string, values []event.Value) {
	d.reserve()
	d.buf = record.AppendSignalJSON(d.buf, deviceID, r, block, span, names, values)
	d.endRecord(r)
}

// endRecord ends the record just encoded, of r, with no values kept.
func (d *Delivery) endRecord(r *record.Result) {
	d.ends = append(d.ends, len(d.buf))
	d.keys = append(d.keys, r.Key...)
	d.keyEnds = append(d.keyEnds, len(d.keys))
	c := *r
	c.Key, c.Values = nil, nil
	d.results = append(d.results, c)
	d.isRes = append(d.isRes, true)
}

// AddDeadLetter encodes a dead letter or late reading. offset is a record
// offset; the record names its message's (stream.MessageOffset).
func (d *Delivery) AddDeadLetter(pipeline, reason, detail, topic string, offset uint64, payload []byte) {
	d.reserve()
	d.buf = record.AppendDeadLetter(d.buf, pipeline, reason, detail, topic, stream.MessageOffset(offset), payload)
	d.ends = append(d.ends, len(d.buf))
	d.keyEnds = append(d.keyEnds, len(d.keys))
	d.results = append(d.results, record.Result{})
	d.isRes = append(d.isRes, false)
}

// AddRaw adds a payload as it is (a pipeline without a window forwards the
// readings that pass its filter).
func (d *Delivery) AddRaw(payload []byte) {
	d.reserve()
	d.buf = append(d.buf, payload...)
	d.ends = append(d.ends, len(d.buf))
	d.keyEnds = append(d.keyEnds, len(d.keys))
	d.results = append(d.results, record.Result{})
	d.isRes = append(d.isRes, false)
}

// Items returns the items, valid as long as d is. Call it once all items
// are added: adding more afterwards invalidates earlier results.
func (d *Delivery) Items() []record.Item {
	d.itemsMu.Lock()
	defer d.itemsMu.Unlock()
	if len(d.items) == len(d.ends) {
		return d.items
	}
	d.items = d.items[:0]
	start, kstart, vstart := 0, 0, 0
	for i, end := range d.ends {
		it := record.Item{Payload: d.buf[start:end:end]}
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
