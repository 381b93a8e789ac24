package sparkplug

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// RebirthMetric is the node metric a host writes true in an NCMD to ask
// for a rebirth.
const RebirthMetric = "Node Control/Rebirth"

// BdSeqMetric is the NBIRTH and NDEATH metric that pairs them.
const BdSeqMetric = "bdSeq"

// Config names the edge node.
type Config struct {
	Group string
	Node  string
	// PrimaryHost is the host application id whose STATE gates the
	// births; "" publishes them as soon as the connection is up.
	PrimaryHost string
	// Types are the datatypes of metrics by name (DataTypeOf the field's
	// type); a metric not in it is a Double. Only Double and Int64 are
	// published: a result's values are float64.
	Types map[string]DataType
	// MaxDevices bounds the device table (one device per key, kept for
	// the node's life: every rebirth repeats its DBIRTH): a result of a
	// new key beyond it is refused (Admit). 0 means DefaultMaxDevices.
	MaxDevices int
}

// DefaultMaxDevices is Config.MaxDevices when unset.
const DefaultMaxDevices = 10000

// Admit reports whether a result of key can be published: its device is
// known, or the table has room for it.
func (n *Node) Admit(key []byte) bool {
	if len(n.devices) < n.cfg.MaxDevices {
		return true
	}
	_, ok := n.devices[string(key)]
	return ok
}

// ActionKind is what the caller of a Node must do.
type ActionKind uint8

// The actions.
const (
	Publish    ActionKind = iota + 1 // publish Payload on Topic with QoS and Retain
	Disconnect                       // close the MQTT connection (after the publishes before it)
)

// Action is one thing to do, in order. Payload is valid until the next
// call on the Node.
type Action struct {
	Kind    ActionKind
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
}

// device is one key: its topics, its metrics' names and aliases, and the
// last values, which a rebirth's DBIRTH carries.
type device struct {
	birth, data, death string
	names              []string
	types              []DataType // of names, from Config.Types
	alias              uint64     // aliases are alias, alias+1, … in names' order
	values             []float64
	ts                 int64
	historical         bool
	born               bool // a DBIRTH went out in the current session
}

// Node is a Sparkplug edge node's session as a pure state machine: events
// in, actions out. It is not safe for concurrent use.
//
// The rules it keeps:
//   - Connect gives the NDEATH to register as the will (QoS 1, not
//     retained) with the connection's bdSeq.
//   - The births (NBIRTH with seq 0, bdSeq and Node Control/Rebirth =
//     false, then a DBIRTH per known device) go out once connected and,
//     with a primary host, once its STATE says online.
//   - A device's DBIRTH precedes its first DDATA; a result whose aggregate
//     names differ from the device's birth is preceded by DDEATH and a new
//     DBIRTH (a host rejects metrics its birth did not announce).
//   - seq runs 0–255 over every message after NBIRTH and wraps.
//   - An NCMD with Node Control/Rebirth = true is answered with the births
//     (same bdSeq; seq restarts at 0).
//   - The primary host going offline (a STATE not older than the last
//     one seen) ends the session: NDEATH, then Disconnect. A new Connect
//     takes a new bdSeq.
type Node struct {
	cfg                   Config
	nbirth, ndeath, ncmd  string
	state                 string
	bdSeq                 uint64
	seq                   uint8
	connected, hostOnline bool
	born                  bool
	hostStamp             int64
	devices               map[string]*device
	order                 []*device
	nextAlias             uint64
	buf                   []byte
	acts                  []Action
	ends                  []int
	pay                   Payload
}

// NewNode checks cfg's ids and returns a node that is not connected.
func NewNode(cfg Config) (*Node, error) {
	if why := ValidID(cfg.Group); why != "" {
		return nil, errors.New("sparkplug: group id " + strconv.Quote(cfg.Group) + " " + why)
	}
	if why := ValidID(cfg.Node); why != "" {
		return nil, errors.New("sparkplug: edge node id " + strconv.Quote(cfg.Node) + " " + why)
	}
	if cfg.MaxDevices <= 0 {
		cfg.MaxDevices = DefaultMaxDevices
	}
	n := &Node{cfg: cfg, devices: map[string]*device{}, nextAlias: 1}
	if cfg.PrimaryHost != "" {
		if why := ValidID(cfg.PrimaryHost); why != "" {
			return nil, errors.New("sparkplug: primary host id " + strconv.Quote(cfg.PrimaryHost) + " " + why)
		}
		n.state = Topic{Type: STATE, Node: cfg.PrimaryHost}.String()
	}
	n.nbirth = Topic{Type: NBIRTH, Group: cfg.Group, Node: cfg.Node}.String()
	n.ndeath = Topic{Type: NDEATH, Group: cfg.Group, Node: cfg.Node}.String()
	n.ncmd = Topic{Type: NCMD, Group: cfg.Group, Node: cfg.Node}.String()
	return n, nil
}

// Subscriptions are the topics the caller subscribes to on every
// connection (QoS 1): the node's NCMD and, with a primary host, its STATE.
func (n *Node) Subscriptions() []string {
	if n.state != "" {
		return []string{n.ncmd, n.state}
	}
	return []string{n.ncmd}
}

// Born reports whether the births of the current connection are out, so
// that results are published rather than kept.
func (n *Node) Born() bool { return n.born }

// BdSeq is the bdSeq of the current or last connection.
func (n *Node) BdSeq() uint64 { return n.bdSeq }

// Connect starts a connection with bdSeq (NextBdSeq) and returns its will.
func (n *Node) Connect(bdSeq uint64, nowMs int64) Action {
	n.bdSeq = bdSeq % 256
	n.connected, n.hostOnline, n.born = false, false, false
	n.begin()
	n.death(nowMs)
	return n.finish()[0]
}

// Connected is the CONNACK: with no primary host the births go out now.
func (n *Node) Connected(nowMs int64) []Action {
	n.connected = true
	n.begin()
	// The primary host's retained STATE may be taken between the
	// subscription and this call.
	if n.state == "" || n.hostOnline {
		n.births(nowMs)
	}
	return n.finish()
}

// Disconnected is the loss of the connection: nothing is published until
// the next Connect and its births.
func (n *Node) Disconnected() {
	n.connected, n.hostOnline, n.born = false, false, false
}

// Death ends a session the node closes itself (a clean DISCONNECT makes
// the broker discard the will): the NDEATH of the current bdSeq, to
// publish before disconnecting. Nothing is published until the next
// Connect and its births.
func (n *Node) Death(nowMs int64) []Action {
	n.begin()
	if n.connected {
		n.death(nowMs)
	}
	n.connected, n.hostOnline, n.born = false, false, false
	return n.finish()
}

// hostState is the JSON payload of a Sparkplug 3.0 STATE message.
type hostState struct {
	Online    *bool  `json:"online"`
	Timestamp *int64 `json:"timestamp"`
}

// HostState is a message on the primary host's STATE topic.
func (n *Node) HostState(payload []byte, nowMs int64) ([]Action, error) {
	var st hostState
	if err := json.Unmarshal(payload, &st); err != nil || st.Online == nil || st.Timestamp == nil {
		return nil, errors.New(`sparkplug: STATE payload is not {"online":bool,"timestamp":ms}: ` + strconv.Quote(string(payload)))
	}
	n.begin()
	// A STATE older than the last one is a stale retained message or a
	// reordered one: the host's current state is the newer one.
	if *st.Timestamp < n.hostStamp {
		return n.finish(), nil
	}
	n.hostStamp = *st.Timestamp
	switch {
	case *st.Online:
		n.hostOnline = true
		if n.connected && !n.born {
			n.births(nowMs)
		}
	case n.born:
		n.hostOnline = false
		// The host that would notice a will is gone: end the session
		// explicitly and reconnect (the caller's retry) to find it again.
		n.death(nowMs)
		n.acts = append(n.acts, Action{Kind: Disconnect})
		n.ends = append(n.ends, len(n.buf))
		n.connected, n.born = false, false
	default:
		n.hostOnline = false
	}
	return n.finish(), nil
}

// Command is an NCMD for this node. Node Control/Rebirth = true is
// answered with the births; other metrics are ignored.
func (n *Node) Command(payload []byte, nowMs int64) ([]Action, error) {
	if err := DecodePayload(payload, &n.pay); err != nil {
		return nil, err
	}
	rebirth := false
	for i := range n.pay.Metrics {
		m := &n.pay.Metrics[i]
		if string(m.Name) == RebirthMetric && m.Value.Kind == KindBool && m.Value.Bits != 0 {
			rebirth = true
		}
	}
	n.begin()
	if rebirth && n.connected && (n.state == "" || n.hostOnline) {
		n.births(nowMs)
	}
	return n.finish(), nil
}

// Result publishes one result of key: names[i] = values[i], measured at
// tsMs (Unix ms); historical marks data that was kept while the node was
// offline. It returns false, and no actions, while the births are not out:
// the caller keeps the result and sends it later as historical. A result
// Admit refuses gets no actions and true: the caller checks Admit first.
// names and values are not kept past the call.
func (n *Node) Result(key []byte, names []string, values []float64, tsMs int64, historical bool, nowMs int64) ([]Action, bool) {
	if !n.born {
		return nil, false
	}
	n.begin()
	d := n.devices[string(key)]
	if d == nil {
		if len(n.devices) >= n.cfg.MaxDevices {
			return nil, true
		}
		id := DeviceID(key)
		d = &device{
			birth: Topic{Type: DBIRTH, Group: n.cfg.Group, Node: n.cfg.Node, Device: id}.String(),
			data:  Topic{Type: DDATA, Group: n.cfg.Group, Node: n.cfg.Node, Device: id}.String(),
			death: Topic{Type: DDEATH, Group: n.cfg.Group, Node: n.cfg.Node, Device: id}.String(),
		}
		n.devices[string(key)] = d
		n.order = append(n.order, d)
	}
	if d.born && !sameNames(d.names, names) {
		n.deviceDeath(d, nowMs)
		d.born = false
	}
	if !sameNames(d.names, names) {
		d.names = append(d.names[:0], names...)
		d.types = d.types[:0]
		for _, name := range names {
			d.types = append(d.types, n.typeOf(name))
		}
		d.alias = n.nextAlias
		n.nextAlias += uint64(len(names))
	}
	d.values = append(d.values[:0], values...)
	d.ts, d.historical = tsMs, historical
	if !d.born {
		n.deviceBirth(d, nowMs)
	}
	p := n.start(nowMs, true)
	for i, v := range values {
		// The datatype repeats the birth's: Tahu's decoders (and the hosts
		// built on them) read a value by its datatype and drop it without.
		m := Metric{Alias: d.alias + uint64(i), HasAlias: true, Datatype: d.types[i], Timestamp: uint64(tsMs), HasTimestamp: true, IsHistorical: historical}
		setValue(&m, v)
		p.Metrics = append(p.Metrics, m)
	}
	n.publish(d.data, 0)
	return n.finish(), true
}

// DeviceID is the Sparkplug device id of a key: the key with '%', '/',
// '+' and '#' percent-encoded (a device id is one topic level), and "%"
// for the empty key, which no encoded key equals.
func DeviceID(key []byte) string {
	if len(key) == 0 {
		return "%"
	}
	const hex = "0123456789ABCDEF"
	var b []byte
	for i, c := range key {
		if c == '%' || c == '/' || c == '+' || c == '#' {
			if b == nil {
				b = append(make([]byte, 0, len(key)+8), key[:i]...)
			}
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else if b != nil {
			b = append(b, c)
		}
	}
	if b == nil {
		return string(key)
	}
	return string(b)
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// typeOf is the datatype of the metric called name: Int64 where
// Config.Types says so, else Double.
func (n *Node) typeOf(name string) DataType {
	if n.cfg.Types[name] == TypeInt64 {
		return TypeInt64
	}
	return TypeDouble
}

// setValue sets m to v in m's datatype, Double or Int64; NaN and ±Inf,
// which the agent's results use for "no value", are is_null (a host shows
// them as null rather than as a number).
func setValue(m *Metric, v float64) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		m.IsNull = true
	case m.Datatype == TypeInt64:
		m.Value = Long(uint64(int64(v)))
	default:
		m.Value = Double(v)
	}
}

// births publishes NBIRTH and every known device's DBIRTH, restarting seq.
func (n *Node) births(nowMs int64) {
	n.seq = 0
	p := n.start(nowMs, true)
	p.Metrics = append(p.Metrics,
		Metric{Name: []byte(BdSeqMetric), Datatype: TypeUInt64, Value: Long(n.bdSeq), Timestamp: uint64(nowMs), HasTimestamp: true},
		Metric{Name: []byte(RebirthMetric), Datatype: TypeBoolean, Value: Bool(false), Timestamp: uint64(nowMs), HasTimestamp: true})
	n.publish(n.nbirth, 0)
	n.born = true
	for _, d := range n.order {
		d.born = false
		n.deviceBirth(d, nowMs)
	}
}

func (n *Node) deviceBirth(d *device, nowMs int64) {
	p := n.start(nowMs, true)
	for i, name := range d.names {
		m := Metric{Name: []byte(name), Alias: d.alias + uint64(i), HasAlias: true, Datatype: d.types[i],
			Timestamp: uint64(d.ts), HasTimestamp: true, IsHistorical: d.historical}
		setValue(&m, d.values[i])
		p.Metrics = append(p.Metrics, m)
	}
	n.publish(d.birth, 0)
	d.born = true
}

func (n *Node) deviceDeath(d *device, nowMs int64) {
	n.start(nowMs, true)
	n.publish(d.death, 0)
}

// death is the NDEATH: the will, or published when the node ends its
// session itself. It has no seq.
func (n *Node) death(nowMs int64) {
	p := n.start(nowMs, false)
	p.Metrics = append(p.Metrics, Metric{Name: []byte(BdSeqMetric), Datatype: TypeUInt64, Value: Long(n.bdSeq)})
	n.publish(n.ndeath, 1)
}

func (n *Node) begin() {
	n.buf, n.acts, n.ends = n.buf[:0], n.acts[:0], n.ends[:0]
}

// start resets the scratch payload for the next message, taking the next
// seq when withSeq.
func (n *Node) start(nowMs int64, withSeq bool) *Payload {
	p := &n.pay
	*p = Payload{Timestamp: uint64(nowMs), HasTimestamp: true, Metrics: p.Metrics[:0]}
	if withSeq {
		p.Seq, p.HasSeq = uint64(n.seq), true
		n.seq++ // uint8: 255 wraps to 0
	}
	return p
}

func (n *Node) publish(topic string, qos byte) {
	n.buf = AppendPayload(n.buf, &n.pay)
	n.acts = append(n.acts, Action{Kind: Publish, Topic: topic, QoS: qos})
	n.ends = append(n.ends, len(n.buf))
}

// finish points each action at its payload (n.buf may have moved while
// they were appended).
func (n *Node) finish() []Action {
	start := 0
	for i := range n.acts {
		if n.acts[i].Kind == Publish {
			n.acts[i].Payload = n.buf[start:n.ends[i]:n.ends[i]]
		}
		start = n.ends[i]
	}
	return n.acts
}
