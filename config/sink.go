package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Sink types, the first label of a sink block.
const (
	SinkMQTT   = "mqtt"
	SinkFile   = "file"
	SinkStdout = "stdout"
	// SinkSparkplug publishes window results as a Sparkplug B edge node.
	SinkSparkplug = "sparkplug"
)

var sinkTypes = []string{SinkMQTT, SinkFile, SinkStdout, SinkSparkplug}

// Delivery guarantees of an MQTT sink.
const (
	ExactlyOnce = "exactly_once"
	AtLeastOnce = "at_least_once"
	AtMostOnce  = "at_most_once"
)

// Sink is a sink block. Exactly one of MQTT, File, Stdout and Sparkplug is
// set, matching Type.
type Sink struct {
	// Type is SinkMQTT, SinkFile, SinkStdout or SinkSparkplug; Name is
	// unique among all sinks and a valid identifier.
	Type, Name string
	MQTT       *MQTTSink
	File       *FileSink
	Stdout     *StdoutSink
	Sparkplug  *SparkplugSink
	DeclRange  hcl.Range
}

// SparkplugSink publishes window results as a Sparkplug B edge node: one
// device per key, one metric per aggregate.
type SparkplugSink struct {
	// Broker is a URL or Embedded.
	Broker string
	// GroupID is the Sparkplug group; required.
	GroupID string
	// EdgeNodeID is a template with ${device_id}; default "${device_id}".
	EdgeNodeID string
	// PrimaryHostID, when set, holds the births until that host
	// application's STATE says online.
	PrimaryHostID string
	// ClientID is a template with ${device_id}; default "eddy-${device_id}-NAME".
	ClientID           string
	Username, Password string
	TLS                *TLS
	// ProtocolVersion is 5 (MQTT 5, the default, falling back to 3.1.1 for
	// the run when the broker refuses it) or 4 (MQTT 3.1.1). ws:// and
	// wss:// brokers get 3.1.1.
	ProtocolVersion int
	// Buffer bounds the log of results held while the node is not born;
	// only max_disk applies (when full the oldest are dropped, counted).
	Buffer Buffer
	// MaxDevices bounds the node's devices (keys); default 10,000.
	MaxDevices int
	// idRange and clientRange are where the node's id and the client id
	// are set: edge_node_id and client_id, or the block.
	idRange, clientRange hcl.Range
}

// MQTTSink publishes results upstream through the WAL.
type MQTTSink struct {
	// Broker is a URL or Embedded.
	Broker string
	// ClientID is a template with ${device_id}; default "eddy-${device_id}-NAME".
	ClientID string
	// Topic is a template with ${device_id}, ${pipeline}, ${key},
	// ${window_start} and ${window_end}; required.
	Topic string
	// QoS defaults to 2. exactly_once and at_least_once need 1 or 2;
	// exactly_once at QoS 1 repeats, after a crash or reconnect, only the
	// unacknowledged in-flight window, each with the same id.
	QoS    int
	Retain bool
	// Delivery is ExactlyOnce (default), AtLeastOnce or AtMostOnce.
	Delivery           string
	Username, Password string
	TLS                *TLS
	Buffer             Buffer
	// MaxInflight is the window of unacknowledged publishes of a sink that
	// uses its WAL (UsesWAL), 1..65535; default 20 (mosquitto's default
	// max_inflight_messages). It must not exceed the broker's per-client
	// limit.
	MaxInflight int
	// DrainTimeout bounds how long a run whose inputs all ended waits,
	// after its final checkpoint, for the sink's WAL (UsesWAL) to be
	// delivered; default 30s, 0 = no wait.
	DrainTimeout time.Duration
	// MaxPayload is the largest encoded result the sink publishes, in
	// bytes; 0 (default) = no limit beyond MQTT's own 256 MiB. A larger
	// result is never published: its pipeline dead-letters it with reason
	// "too_large". AWS IoT Core's limit is 128 KB.
	MaxPayload int64
	// ProtocolVersion is the MQTT version the sink speaks: 5 (default) or
	// 4 (3.1.1). At 5 a sink that uses its WAL falls back to 3.1.1 when
	// the broker refuses the version in its CONNACK; a sink that does not
	// (paho's client) speaks 3.1.1 only.
	ProtocolVersion int
	// MessageExpiry, when set (a sink through its WAL), dead-letters with
	// reason "expired" a result that waited longer in the WAL since its
	// checkpoint; at MQTT 5 the others carry the expiry left. 0: none.
	MessageExpiry time.Duration
	// SessionExpiry is the MQTT 5 session's expiry after a disconnect;
	// 0 (default): never.
	SessionExpiry time.Duration
	// MaxTopicLevels, when set, makes the loader warn about a topic
	// template that can have more levels (or holds ${key}, whose values may
	// add levels); 0 (default) = no check. AWS IoT
	// Core allows 8 levels (7 slashes).
	MaxTopicLevels int
}

// UsesWAL reports whether the sink publishes through its write-ahead log:
// exactly_once always; at_least_once on tcp:// and ssl:// brokers (and the
// embedded one) too, as a disk buffer published at once; at_most_once and
// ws:// or wss:// brokers through paho, from memory.
func (m *MQTTSink) UsesWAL() bool {
	switch {
	case m.Delivery == ExactlyOnce:
		return true
	case m.Delivery != AtLeastOnce:
		return false
	case m.Broker == Embedded:
		return true
	}
	scheme, _, _ := strings.Cut(m.Broker, "://")
	switch scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
		return true
	}
	return false
}

// Buffer bounds the sink's WAL while the uplink is down.
type Buffer struct {
	// MaxDiskBytes defaults to 512 MiB.
	MaxDiskBytes int64
	// WhenFull is "block" (default: backpressure) or "drop_oldest" (counted).
	WhenFull string
	// DrainRate caps publishing, steady or draining a backlog, in messages
	// per second; 0 is unlimited.
	DrainRate float64
}

// FileSink writes JSON lines with two-phase commit.
type FileSink struct {
	// Path is the file written; relative paths are under the agent's data_dir.
	Path string
	// RotateSizeBytes defaults to 64 MiB.
	RotateSizeBytes int64
	// Format is "jsonl", the only one.
	Format string
	// Delivery is AtLeastOnce (default: append to Path, rotated by size) or
	// ExactlyOnce: two-phase commit of one part file per checkpoint into the
	// directory Path, visible only once the checkpoint completes.
	Delivery string
	// MaxFiles and MaxAge (rotate block, exactly_once only) bound the
	// committed part files kept: the newest MaxFiles, none written longer
	// than MaxAge ago. 0 is no bound (every part is kept, as the default).
	MaxFiles int
	MaxAge   time.Duration
}

// StdoutSink prints results.
type StdoutSink struct {
	// Format is "pretty" (default) or "jsonl".
	Format string
}

// decodeSinks decodes every sink block, in order.
func (d *decoder) decodeSinks(blocks hcl.Blocks, broker *Broker) []*Sink {
	var out []*Sink
	seen := map[string]*Sink{}
	for _, b := range blocks {
		typ, name := b.Labels[0], b.Labels[1]
		if !d.checkTypeLabel(b, "sink", sinkTypes) || !d.checkNameLabel(b, 1) {
			continue
		}
		if prev := seen[name]; prev != nil {
			d.errorf(b.LabelRanges[1], "Duplicate sink name",
				"A sink named %q is already declared at %s; sink names must be unique.", name, prev.DeclRange)
			continue
		}
		s := &Sink{Type: typ, Name: name, DeclRange: b.DefRange}
		seen[name] = s
		switch typ {
		case SinkMQTT:
			s.MQTT = d.decodeMQTTSink(b, name, broker)
		case SinkFile:
			a, c := d.content(b, []string{"path", "rotate_size", "format", "delivery"}, hcl.BlockHeaderSchema{Type: "rotate"})
			a.require("path")
			s.File = &FileSink{
				Path:            a.str("path", noVars, ""),
				RotateSizeBytes: a.size("rotate_size", 64<<20),
				Format:          a.enum("format", []string{"jsonl"}, "jsonl"),
				Delivery:        a.enum("delivery", []string{AtLeastOnce, ExactlyOnce}, AtLeastOnce),
			}
			if a.has("rotate_size") && s.File.RotateSizeBytes < 4096 {
				d.errorf(a.rangeOf("rotate_size"), "Value out of range", "\"rotate_size\" must be at least 4KiB.")
			}
			if a.has("rotate_size") && s.File.Delivery == ExactlyOnce {
				d.errorf(a.rangeOf("rotate_size"), "Argument does not apply",
					"An exactly_once file sink writes one part file per checkpoint into the directory \"path\"; it does not rotate by size. Bound its parts with a rotate { max_files, max_age } block.")
			}
			d.decodePartRotation(c.Blocks, s.File)
		case SinkStdout:
			a, _ := d.content(b, []string{"format"})
			s.Stdout = &StdoutSink{Format: a.enum("format", []string{"pretty", "jsonl"}, "pretty")}
		case SinkSparkplug:
			s.Sparkplug = d.decodeSparkplugSink(b, name, broker)
		}
		out = append(out, s)
	}
	return out
}

// decodePartRotation decodes an exactly_once file sink's rotate block.
func (d *decoder) decodePartRotation(blocks hcl.Blocks, f *FileSink) {
	rb := d.single(blocks, "rotate")
	if rb == nil {
		return
	}
	if f.Delivery != ExactlyOnce {
		d.errorf(rb.DefRange, "Block does not apply",
			"rotate bounds the part files of an exactly_once file sink; an at_least_once file sink rotates by \"rotate_size\". Remove the block, or set delivery = \"exactly_once\".")
		return
	}
	ra, _ := d.content(rb, []string{"max_files", "max_age"})
	f.MaxFiles = int(ra.integer("max_files", 0, 1, 1<<30))
	f.MaxAge = ra.duration("max_age", 0)
	if ra.has("max_age") && f.MaxAge <= 0 {
		d.errorf(ra.rangeOf("max_age"), "Value out of range", "\"max_age\" must be positive; remove it to keep parts of any age.")
	}
}

func (d *decoder) decodeMQTTSink(b *hcl.Block, name string, broker *Broker) *MQTTSink {
	a, c := d.content(b, []string{"broker", "client_id", "topic", "qos", "retain", "delivery", "username", "password", "max_inflight", "drain_timeout", "max_payload", "max_topic_levels", "protocol_version", "message_expiry", "session_expiry"},
		tlsBlock, hcl.BlockHeaderSchema{Type: "buffer"})
	a.require("broker", "topic")
	m := &MQTTSink{
		Broker:   a.str("broker", noVars, ""),
		ClientID: a.str("client_id", deviceIDVars, "eddy-${device_id}-"+name),
		Topic:    a.str("topic", sinkTopicVars, ""),
		QoS:      int(a.integer("qos", 2, 0, 2)),
		Retain:   a.boolean("retain", false),
		Delivery: a.enum("delivery", []string{ExactlyOnce, AtLeastOnce, AtMostOnce}, ExactlyOnce),
		Username: a.str("username", noVars, ""),
		Password: a.str("password", noVars, ""),
		TLS:      d.decodeTLS(c.Blocks, false),
		Buffer:   Buffer{MaxDiskBytes: 512 << 20, WhenFull: "block"},

		MaxInflight:  int(a.integer("max_inflight", 20, 1, 65535)),
		DrainTimeout: a.duration("drain_timeout", 30*time.Second),

		MaxPayload:     a.size("max_payload", 0),
		MaxTopicLevels: int(a.integer("max_topic_levels", 0, 1, 128)),
	}
	m.ProtocolVersion = d.protocolVersion(a, m)
	d.decodeExpiry(a, m)
	if a.has("max_payload") && (m.MaxPayload <= 0 || m.MaxPayload > maxMQTTPayload) {
		d.errorf(a.rangeOf("max_payload"), "Value out of range",
			"\"max_payload\" must be between 1 byte and MQTT's own limit, \"256MiB\" (AWS IoT Core: \"128KiB\"); remove it for no limit.")
	}
	if m.MaxTopicLevels > 0 && m.Topic != "" {
		d.checkTopicLevels(a.rangeOf("topic"), m.Topic, m.MaxTopicLevels)
	}
	d.checkBroker(a, m.Broker, broker)
	if m.Broker == Embedded {
		d.warnEmbeddedCredentials(a, m.TLS)
	}
	if a.has("topic") && m.Topic != "" {
		if err := validateTopicName(m.Topic); err != nil {
			d.errorf(a.rangeOf("topic"), "Invalid topic", "%q: %s.", m.Topic, strings.TrimPrefix(err.Error(), "config: "))
		}
	}
	switch {
	case m.Delivery == ExactlyOnce && m.QoS == 0:
		d.errorf(a.rangeOf("qos"), "QoS too low for delivery",
			"delivery = \"exactly_once\" publishes at QoS 2 (no duplicates) or 1 (for brokers without QoS 2: repeats only of the unacknowledged window, each with the same id); remove qos or set qos = 2 or 1.")
	case m.Delivery == AtLeastOnce && m.QoS == 0:
		d.errorf(a.rangeOf("qos"), "QoS too low for delivery", "delivery = \"at_least_once\" needs qos = 1 or 2.")
	}
	for _, name := range []string{"max_inflight", "drain_timeout"} {
		if a.has(name) && !m.UsesWAL() {
			d.errorf(a.rangeOf(name), "Argument does not apply",
				"%q applies to the sink's write-ahead log and publish session (exactly_once, and at_least_once on tcp:// or ssl:// brokers); remove it.", name)
		}
	}
	if bb := d.single(c.Blocks, "buffer"); bb != nil {
		ba, _ := d.content(bb, []string{"max_disk", "when_full", "drain_rate"})
		m.Buffer.MaxDiskBytes = ba.size("max_disk", m.Buffer.MaxDiskBytes)
		m.Buffer.WhenFull = ba.enum("when_full", []string{"block", "drop_oldest"}, m.Buffer.WhenFull)
		m.Buffer.DrainRate = ba.float("drain_rate", 0, 0, 1e9)
		if ba.has("max_disk") && m.Buffer.MaxDiskBytes < 1<<20 {
			d.errorf(ba.rangeOf("max_disk"), "Value out of range", "\"max_disk\" must be at least 1MiB.")
		}
	}
	return m
}

// protocolVersion decodes protocol_version: 4 (MQTT 3.1.1) or 5 (MQTT 5,
// the default, falling back to 3.1.1 when the broker refuses it). A sink
// publishing through paho (not UsesWAL) speaks 3.1.1 only.
func (d *decoder) protocolVersion(a attrs, m *MQTTSink) int {
	if !a.has("protocol_version") {
		if !m.UsesWAL() {
			return 4
		}
		return 5
	}
	f, ok := a.number("protocol_version", "5")
	if !ok {
		return 5
	}
	n, acc := f.Int64()
	if !f.IsInt() || acc != 0 || (n != 4 && n != 5) {
		d.errorf(a.rangeOf("protocol_version"), "Invalid protocol version",
			"\"protocol_version\" is 5 (MQTT 5, the default: it falls back to 3.1.1 when the broker refuses it) or 4 (MQTT 3.1.1); got %s. Remove it, or set protocol_version = 4 for a broker that speaks 3.1.1 only.", f.Text('g', 10))
		return 5
	}
	if n == 5 && !m.UsesWAL() {
		d.errorf(a.rangeOf("protocol_version"), "Protocol version not supported here",
			"A sink that does not use its write-ahead log (at_most_once, or a ws:// or wss:// broker) speaks MQTT 3.1.1 only; set protocol_version = 4 or remove it, or use delivery = \"exactly_once\" for MQTT 5.")
		return 4
	}
	return int(n)
}

// decodeExpiry decodes message_expiry and session_expiry of a sink that
// uses its WAL; session_expiry only at MQTT 5.
func (d *decoder) decodeExpiry(a attrs, m *MQTTSink) {
	m.MessageExpiry = a.duration("message_expiry", 0)
	m.SessionExpiry = a.duration("session_expiry", 0)
	const maxInterval = (1<<32 - 2) * time.Second
	for _, name := range []string{"message_expiry", "session_expiry"} {
		if !a.has(name) {
			continue
		}
		v := m.MessageExpiry
		if name == "session_expiry" {
			v = m.SessionExpiry
		}
		switch {
		case !m.UsesWAL():
			d.errorf(a.rangeOf(name), "Argument does not apply",
				"%q applies to a sink that publishes through its write-ahead log (exactly_once, and at_least_once on tcp:// or ssl:// brokers); remove it.", name)
		case v < time.Second || v > maxInterval:
			d.errorf(a.rangeOf(name), "Value out of range",
				"%q must be at least \"1s\" (and below 136 years), e.g. %s = \"1h\"; remove it for none.", name, name)
		case name == "session_expiry" && m.ProtocolVersion != 5:
			d.errorf(a.rangeOf(name), "Argument does not apply",
				"\"session_expiry\" is MQTT 5's Session Expiry Interval; with protocol_version = 4 the session never expires. Remove it, or remove protocol_version = 4.")
		}
	}
}

// warnEmbeddedCredentials warns about each of username, password and tls
// that a client of the embedded broker sets: the agent connects its own
// clients through the broker's internal listener, with credentials of its
// own, so these settings are ignored, and a reader could think they
// protect something.
func (d *decoder) warnEmbeddedCredentials(a attrs, tls *TLS) {
	const why = "%s has no effect with broker = \"embedded\": remove it; the agent's own clients connect to the embedded broker through an internal loopback listener."
	for _, name := range []string{"username", "password"} {
		if a.has(name) {
			d.warnf(a.rangeOf(name), "Argument has no effect", why, fmt.Sprintf("%q", name))
		}
	}
	if tls != nil {
		d.warnf(tls.DeclRange, "Block has no effect", why, "The tls block")
	}
}

// maxMQTTPayload is the largest payload an MQTT packet can carry (its
// remaining length is at most 268,435,455 bytes).
const maxMQTTPayload = 256 << 20

// checkTopicLevels warns when the topic template can have more than max
// levels. The template's own slashes are counted; ${key} may hold slashes
// too, which only the data decides (the device id cannot, ${pipeline} is an
// identifier and the window bounds are numbers).
func (d *decoder) checkTopicLevels(rng hcl.Range, topic string, max int) {
	levels := strings.Count(topic, "/") + 1
	switch {
	case levels > max:
		d.warnf(rng, "Topic has too many levels",
			"%q has %d levels, more than max_topic_levels = %d: the broker may refuse every publish (AWS IoT Core allows 8 levels, 7 slashes). Shorten the topic.", topic, levels, max)
	case strings.Contains(topic, "${key}"):
		d.warnf(rng, "Topic may have too many levels",
			"%q has %d levels of at most %d (max_topic_levels), but a key may contain \"/\" and add levels, and the broker may then refuse the publish. Keep slashes out of keys, or leave ${key} out of the topic (it is in the payload).", topic, levels, max)
	}
}

func (d *decoder) decodeSparkplugSink(b *hcl.Block, name string, broker *Broker) *SparkplugSink {
	a, c := d.content(b, []string{"broker", "group_id", "edge_node_id", "primary_host_id", "client_id", "username", "password", "protocol_version", "max_devices"}, tlsBlock,
		hcl.BlockHeaderSchema{Type: "buffer"})
	a.require("broker", "group_id")
	m := &SparkplugSink{
		Broker:          a.str("broker", noVars, ""),
		GroupID:         a.str("group_id", noVars, ""),
		EdgeNodeID:      a.str("edge_node_id", deviceIDVars, "${device_id}"),
		PrimaryHostID:   a.str("primary_host_id", noVars, ""),
		ClientID:        a.str("client_id", deviceIDVars, "eddy-${device_id}-"+name),
		Username:        a.str("username", noVars, ""),
		Password:        a.str("password", noVars, ""),
		TLS:             d.decodeTLS(c.Blocks, false),
		ProtocolVersion: 5,
		Buffer:          Buffer{MaxDiskBytes: 512 << 20, WhenFull: "drop_oldest"},
		idRange:         b.DefRange,
		clientRange:     b.DefRange,
		MaxDevices:      int(a.integer("max_devices", 10000, 1, 1000000)),
	}
	if a.has("edge_node_id") {
		m.idRange = a.rangeOf("edge_node_id")
	}
	if a.has("client_id") {
		m.clientRange = a.rangeOf("client_id")
	}
	if bb := d.single(c.Blocks, "buffer"); bb != nil {
		ba, _ := d.content(bb, []string{"max_disk", "when_full"})
		m.Buffer.MaxDiskBytes = ba.size("max_disk", m.Buffer.MaxDiskBytes)
		if ba.has("max_disk") && m.Buffer.MaxDiskBytes < 1<<20 {
			d.errorf(ba.rangeOf("max_disk"), "Value out of range", "\"max_disk\" must be at least 1MiB.")
		}
		// No "block": a node that stops its pipelines while a host is away
		// would stop the other sinks' results too.
		m.Buffer.WhenFull = ba.enum("when_full", []string{"drop_oldest"}, m.Buffer.WhenFull)
	}
	for _, id := range []struct{ attr, value string }{{"group_id", m.GroupID}, {"edge_node_id", m.EdgeNodeID}, {"primary_host_id", m.PrimaryHostID}} {
		if !a.has(id.attr) {
			continue
		}
		if why := sparkplugIDProblem(id.value); why != "" {
			d.errorf(a.rangeOf(id.attr), "Invalid Sparkplug id",
				"%q %s: a Sparkplug id is one topic level. Use letters, digits, '-' or '_', e.g. %s = \"plant-1\".", id.value, why, id.attr)
		}
	}
	if a.has("protocol_version") {
		if f, ok := a.number("protocol_version", "5"); ok {
			n, acc := f.Int64()
			if !f.IsInt() || acc != 0 || (n != 4 && n != 5) {
				d.errorf(a.rangeOf("protocol_version"), "Protocol version not supported",
					"The Sparkplug sink speaks MQTT 5 (protocol_version = 5, the default: 3.1.1 when the broker refuses 5) or MQTT 3.1.1 (4), which Sparkplug B 3.0 requires every broker and host to support; got %s.", f.Text('g', 10))
			} else {
				m.ProtocolVersion = int(n)
			}
		}
	}
	d.checkBroker(a, m.Broker, broker)
	if m.Broker == Embedded {
		d.warnEmbeddedCredentials(a, m.TLS)
	}
	return m
}

// checkSparkplugNodes refuses two Sparkplug sinks that are one edge node
// (the same group and node id, ${device_id} filled in) on one broker:
// each one's CONNECT would end the other's session, and the births and
// deaths of the two would interleave under one name, as a host sees it.
// A Sparkplug sink's client id taken by another sink on its broker is
// refused for the same reason.
func (d *decoder) checkSparkplugNodes(sinks []*Sink, deviceID string) {
	type node struct{ broker, group, id string }
	seen := map[node]*Sink{}
	vars := map[string]string{"device_id": deviceID}
	brokerKey := func(b string) string { return strings.TrimSuffix(strings.ToLower(b), "/") }
	clients := map[[2]string]*Sink{}
	for _, s := range sinks {
		if s.MQTT != nil {
			clients[[2]string{brokerKey(s.MQTT.Broker), Expand(s.MQTT.ClientID, vars)}] = s
		}
	}
	for _, s := range sinks {
		m := s.Sparkplug
		if m == nil {
			continue
		}
		ck := [2]string{brokerKey(m.Broker), Expand(m.ClientID, vars)}
		if prev := clients[ck]; prev != nil {
			d.errorf(m.clientRange, "Duplicate MQTT client id",
				"sink.%s.%s (%s) already connects to %s as %q: a broker keeps one connection per client id and closes the other, so the two would end each other's sessions. Give this sink its own client_id, e.g. client_id = \"eddy-${device_id}-%s\".",
				prev.Type, prev.Name, prev.DeclRange, m.Broker, ck[1], s.Name)
		} else {
			clients[ck] = s
		}
		k := node{brokerKey(m.Broker), m.GroupID, Expand(m.EdgeNodeID, vars)}
		if prev := seen[k]; prev != nil {
			d.errorf(m.idRange, "Duplicate Sparkplug edge node",
				"sink.sparkplug.%s (%s) is already edge node %q of group %q on %s: two sinks with one node id steal each other's session, and a host cannot tell their births and deaths apart. Give this sink its own edge_node_id, e.g. edge_node_id = \"%s-%s\".",
				prev.Name, prev.DeclRange, k.id, k.group, m.Broker, k.id, s.Name)
			continue
		}
		seen[k] = s
	}
}

// sparkplugIDProblem says why id cannot be a Sparkplug group, node or
// host id, or "". The device id that ${device_id} stands for holds none
// of '/', '+' and '#' (decodeAgent refuses it), so the template's own text
// decides.
func sparkplugIDProblem(id string) string {
	switch {
	case id == "":
		return "is empty"
	case strings.ContainsAny(strings.ReplaceAll(id, "${device_id}", ""), "/+#"):
		return "contains '/', '+' or '#'"
	}
	return ""
}
