package sparkplug

import "strconv"

// Reasons a Reader refuses a message, for the dead-letter record.
const (
	ReasonNotSparkplug = "not_sparkplug" // the topic is not a Sparkplug B edge-node topic
	ReasonBadPayload   = "bad_payload"   // the payload does not decode
	ReasonBeforeBirth  = "before_birth"  // data or a device birth before its node's (or device's) birth
	ReasonSeqGap       = "seq_gap"       // seq is not one more than the node's last message
	ReasonUnknownAlias = "unknown_alias" // a metric's alias no birth of the session announced
)

// Reading is one metric of a message, its name resolved from the births.
// Its strings and Value alias the topic, the payload or the Reader's
// tables: valid during the emit call only.
type Reading struct {
	Group, Node, Device string // Device is "" for node metrics
	Name                []byte
	Datatype            DataType
	Value               Value
	IsNull              bool
	Timestamp           uint64 // the metric's, else the payload's (Unix ms)
	Historical          bool
	// Stale marks the last value of a metric whose node or device died
	// (NDEATH, DDEATH): Value is the last one the Reader saw.
	Stale bool
}

type nodeKey struct{ group, node string }

// known is a metric a birth announced.
type known struct {
	device   string
	name     []byte
	datatype DataType
	last     Value
	lastNull bool
}

type readerNode struct {
	born    bool
	bdSeq   uint64
	seq     uint64
	devices map[string]bool // born devices
	aliases map[uint64]int  // alias → index in metrics
	metrics []known
}

// Reader turns the messages of Sparkplug edge nodes into readings, as a
// host application reads them: it resolves aliases from the births,
// checks seq, and marks a dead node's or device's metrics stale. It is a
// pure state machine, not safe for concurrent use.
type Reader struct {
	nodes map[nodeKey]*readerNode
	pay   Payload
	rd    Reading // handed to emit: a local would escape to the heap per message
}

// NewReader returns a Reader that knows no node yet.
func NewReader() *Reader { return &Reader{nodes: map[nodeKey]*readerNode{}} }

// Message reads one message. It calls emit for each reading and returns
// "" or, when it refuses the message (no reading is emitted), the reason
// (Reason…) and a detail for the dead letter. NCMD, DCMD and STATE carry
// no readings and are not refused.
func (r *Reader) Message(topic string, payload []byte, emit func(*Reading)) (reason, detail string) {
	t, err := ParseTopic(topic)
	if err != nil {
		return ReasonNotSparkplug, err.Error()
	}
	switch t.Type {
	case NCMD, DCMD, STATE:
		return "", ""
	}
	if err := DecodePayload(payload, &r.pay); err != nil {
		return ReasonBadPayload, err.Error()
	}
	p := &r.pay
	if t.Type == NBIRTH || t.Type == DBIRTH {
		// A birth names every metric: later data may refer to it by alias
		// only, and a reading needs a name.
		for i := range p.Metrics {
			if len(p.Metrics[i].Name) == 0 {
				return ReasonBadPayload, t.Type.String() + " metric " + uitoa(uint64(i)) + " has no name"
			}
		}
	}
	k := nodeKey{t.Group, t.Node}
	n := r.nodes[k]
	if t.Type == NBIRTH {
		if n == nil {
			n = &readerNode{devices: map[string]bool{}, aliases: map[uint64]int{}}
			r.nodes[k] = n
		}
		n.born, n.seq, n.metrics = true, p.Seq, n.metrics[:0]
		clear(n.devices)
		clear(n.aliases)
		for i := range p.Metrics {
			if string(p.Metrics[i].Name) == BdSeqMetric {
				n.bdSeq = p.Metrics[i].Value.Bits
			}
		}
		return r.birth(t, n, "", emit)
	}
	if n == nil || !n.born {
		return ReasonBeforeBirth, t.Type.String() + " of node " + t.Group + "/" + t.Node + " before its NBIRTH"
	}
	if t.Type == NDEATH {
		// A will of an older session arrives after the newer one's birth
		// when the broker noticed the old connection's death late.
		for i := range p.Metrics {
			if string(p.Metrics[i].Name) == BdSeqMetric && p.Metrics[i].Value.Bits != n.bdSeq {
				return "", ""
			}
		}
		n.born = false
		r.stale(t, n, nil, emit)
		clear(n.devices)
		return "", ""
	}
	if !p.HasSeq || p.Seq != (n.seq+1)%256 {
		got := "none"
		if p.HasSeq {
			got = uitoa(p.Seq)
		}
		// The node's state is unknown until it is reborn (a host asks
		// with an NCMD rebirth).
		n.born = false
		return ReasonSeqGap, t.Type.String() + " seq " + got + ", want " + uitoa((n.seq+1)%256)
	}
	n.seq = p.Seq
	switch t.Type {
	case DBIRTH:
		n.devices[t.Device] = true
		return r.birth(t, n, t.Device, emit)
	case DDEATH:
		r.stale(t, n, &t.Device, emit)
		delete(n.devices, t.Device)
		return "", ""
	case DDATA:
		if !n.devices[t.Device] {
			return ReasonBeforeBirth, "DDATA of device " + t.Device + " before its DBIRTH"
		}
	}
	// NDATA, DDATA: resolve every metric first, so a refused message
	// emits nothing.
	for i := range p.Metrics {
		if _, ok := n.lookup(&p.Metrics[i], t.Device); !ok {
			return ReasonUnknownAlias, "metric " + uitoa(uint64(i)) + " (alias " + uitoa(p.Metrics[i].Alias) + ") was in no birth of the session"
		}
	}
	rd := &r.rd
	for i := range p.Metrics {
		m := &p.Metrics[i]
		j, _ := n.lookup(m, t.Device)
		km := &n.metrics[j]
		km.last, km.lastNull = m.Value, m.IsNull
		r.fill(rd, t, m, km)
		emit(rd)
	}
	return "", ""
}

// lookup finds a data message's metric among those born: by alias, else
// by name within the device.
func (n *readerNode) lookup(m *Metric, device string) (int, bool) {
	if m.HasAlias && m.Name == nil {
		j, ok := n.aliases[m.Alias]
		return j, ok && n.metrics[j].device == device
	}
	for j := range n.metrics {
		if n.metrics[j].device == device && string(n.metrics[j].name) == string(m.Name) {
			return j, true
		}
	}
	return 0, false
}

func (r *Reader) birth(t Topic, n *readerNode, device string, emit func(*Reading)) (string, string) {
	p := &r.pay
	// A device reborn replaces its metrics.
	n.metrics = dropDevice(n.metrics, n.aliases, device)
	rd := &r.rd
	for i := range p.Metrics {
		m := &p.Metrics[i]
		n.metrics = append(n.metrics, known{device: device, name: append([]byte(nil), m.Name...), datatype: m.Datatype,
			last: Value{Kind: m.Value.Kind, Bits: m.Value.Bits, Str: append([]byte(nil), m.Value.Str...)}, lastNull: m.IsNull})
		if m.HasAlias {
			n.aliases[m.Alias] = len(n.metrics) - 1
		}
		r.fill(rd, t, m, &n.metrics[len(n.metrics)-1])
		emit(rd)
	}
	return "", ""
}

// dropDevice removes device's metrics (a rebirth of it) and renumbers the
// aliases of those after them.
func dropDevice(ms []known, aliases map[uint64]int, device string) []known {
	kept := ms[:0]
	index := make([]int, len(ms))
	for i := range ms {
		index[i] = -1
		if ms[i].device != device {
			index[i] = len(kept)
			kept = append(kept, ms[i])
		}
	}
	if len(kept) == len(ms) {
		return ms
	}
	for a, i := range aliases {
		if index[i] < 0 {
			delete(aliases, a)
		} else {
			aliases[a] = index[i]
		}
	}
	return kept
}

func (r *Reader) fill(rd *Reading, t Topic, m *Metric, km *known) {
	*rd = Reading{Group: t.Group, Node: t.Node, Device: km.device, Name: km.name, Datatype: km.datatype,
		Value: m.Value, IsNull: m.IsNull, Timestamp: r.pay.Timestamp, Historical: m.IsHistorical}
	if m.Datatype != TypeUnknown {
		rd.Datatype = m.Datatype
	}
	if m.HasTimestamp {
		rd.Timestamp = m.Timestamp
	}
}

// stale emits the last value of each metric of the node (device nil) or
// of one device, marked stale, stamped with the death's timestamp.
func (r *Reader) stale(t Topic, n *readerNode, device *string, emit func(*Reading)) {
	rd := &r.rd
	for i := range n.metrics {
		km := &n.metrics[i]
		// A node's death ends its born devices too; one dead earlier was
		// made stale by its DDEATH.
		if device != nil && km.device != *device || device == nil && km.device != "" && !n.devices[km.device] {
			continue
		}
		*rd = Reading{Group: t.Group, Node: t.Node, Device: km.device, Name: km.name, Datatype: km.datatype,
			Value: km.last, IsNull: km.lastNull, Timestamp: r.pay.Timestamp, Stale: true}
		emit(rd)
	}
}

func uitoa(u uint64) string { return strconv.FormatUint(u, 10) }
