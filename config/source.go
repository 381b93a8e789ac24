package config

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Source types, the first label of a source block.
const (
	SourceMQTT      = "mqtt"
	SourceFile      = "file"
	SourceSimulator = "simulator"
)

var sourceTypes = []string{SourceMQTT, SourceFile, SourceSimulator}

// Source is a source block. Exactly one of MQTT, File and Simulator is set,
// matching Type.
type Source struct {
	// Type is SourceMQTT, SourceFile or SourceSimulator; Name is unique among
	// all sources and a valid identifier.
	Type, Name string
	MQTT       *MQTTSource
	File       *FileSource
	Simulator  *SimulatorSource
	// Format is "json" (default), "csv", "raw" or, on an MQTT source,
	// FormatSparkplugB. A simulator is always json.
	Format string
	// CSV is set for format "csv" (defaults when there is no csv block).
	CSV *CSV
	// Timestamp says where event time comes from; nil means the source has no
	// event time, so its windows default to processing time. A simulator has
	// Timestamp{Field: "ts", Unit: "ms"}, the shape of its readings.
	Timestamp *Timestamp
	Watermark Watermark
	DeclRange hcl.Range
}

// MQTTSource subscribes to a broker.
type MQTTSource struct {
	// Broker is a tcp://, ssl://, ws:// or wss:// URL, or Embedded.
	Broker string
	// ClientID is a template with ${device_id}. Default
	// "eddy-${device_id}-NAME".
	ClientID string
	// Topics are MQTT filters, at least one; they may hold ${device_id}.
	Topics []string
	// QoS is 0, 1 (default) or 2.
	QoS                int
	Username, Password string
	// CleanSession is false by default: a persistent session keeps messages
	// that arrive while the agent is down.
	CleanSession bool
	// KeepAlive defaults to 30s.
	KeepAlive time.Duration
	// ReconnectMin and ReconnectMax bound the reconnect backoff; defaults 1s
	// and 1m.
	ReconnectMin, ReconnectMax time.Duration
	TLS                        *TLS
	// MaxMessageSize bounds a message's payload, in bytes: a larger one is
	// acknowledged, dead-lettered with reason too_large (its payload
	// truncated) and counted, so it never blocks the topic. Default
	// DefaultMaxMessageSize, or less when the ingest segment is smaller (see
	// MaxMessageSizeLimit). Not used with the embedded broker, whose own
	// limit applies.
	MaxMessageSize   int64
	maxMessageSizeAt *hcl.Range
	// Connections above 1 (at most 16) read through that many connections
	// with a shared subscription ($share/GROUP/TOPIC), so ingest can use more
	// cores. Readings of one sensor may then arrive out of order across
	// connections: keep max_out_of_orderness above zero. Default 1.
	Connections int
	// DedupKey, when set, is a field path of the JSON payload (e.g. "id" or
	// "meta.seq") carrying a producer-assigned message id: a message whose
	// (topic, id) was logged within DedupWindow is dropped before the
	// ingest log (and acked), even without the broker's DUP flag, which a
	// QoS 1 producer re-sending after its own reconnect does not set.
	// Messages without the field are kept. Empty: only broker redeliveries
	// are dropped.
	DedupKey string
	// DedupWindow is how long an id is remembered, by arrival time; default
	// 10m. At most DedupMaxIDs ids are remembered, whatever the window.
	DedupWindow time.Duration
	// MaxInflight is the broker's in-flight window per connection: how many
	// QoS 1/2 messages it sends before waiting for acks (mosquitto's
	// max_inflight_messages). MQTT 3.1.1 does not announce it. It bounds
	// the tail of logged messages that a resumed connection's re-sends
	// without the DUP flag are matched against (ingest.DedupOptions
	// MaxInflight); 0 turns that matching off. Default DefaultMaxInflight,
	// at most 65535.
	MaxInflight int
	// RequestRebirth (format sparkplug_b): a data message the source
	// cannot read — before its node's or device's birth, after a gap in
	// seq, with an alias no birth announced — is answered with an NCMD
	// "Node Control/Rebirth" to its node, so that its births come again.
	RequestRebirth bool
	// ProtocolVersion is the MQTT version the source speaks: 5 (default on
	// tcp:// and ssl:// brokers, falling back to 3.1.1 when the broker
	// refuses it) or 4 (MQTT 3.1.1; the only one on ws:// and wss://).
	ProtocolVersion int
	// SessionExpiry is the MQTT 5 session's expiry after a disconnect; 0:
	// never (as MQTT 3.1.1's persistent session).
	SessionExpiry time.Duration
	// ReceiveMaximum is the MQTT 5 Receive Maximum the source announces:
	// the most QoS 1/2 messages the broker may have unacknowledged to it.
	// Default DefaultReceiveMaximum, 1 to 65535.
	ReceiveMaximum int
}

// DefaultReceiveMaximum is receive_maximum's default: about what one ingest
// commit takes, so the broker never has more than a commit's worth of
// messages unacknowledged to the agent.
const DefaultReceiveMaximum = 1000

// DefaultMaxInflight is max_inflight's default: the in-flight window the
// README asks of mosquitto.
const DefaultMaxInflight = 1000

// DedupMaxIDs is the most ids a source's dedup_key filter remembers (the
// ingest package's default window, about 40 bytes each).
const DedupMaxIDs = 65536

// FileSource reads newline-separated readings from a file.
type FileSource struct {
	// Path is the file to read; "-" is standard input.
	Path string
}

// SimulatorSource publishes synthetic readings shaped like
// {"device":"sensor-3","ts":<ms>,"temp":21.5,"humidity":40.1}.
type SimulatorSource struct {
	// Broker is Embedded (default) or a URL.
	Broker string
	// Topic is a template with ${sensor}, the only variable, as a whole
	// level. Default "sensors/${sensor}/telemetry".
	Topic string
	// Devices is the number of simulated sensors, default 10.
	Devices int
	// Rate is readings per second over all devices, default 20.
	Rate float64
	Seed int64
	// OutOfOrder, Late and Malformed are fractions of readings in [0, 1];
	// defaults 0.1, 0.01 and 0.005.
	OutOfOrder, Late, Malformed float64
	// MaxReadings stops the simulator after that many; 0 is unlimited.
	MaxReadings int64
	// ProtocolVersion is the MQTT version the simulator publishes with: 5
	// (default on the embedded broker, tcp:// and ssl://; each reading
	// carries the user property "sensor") or 4 (the only one on ws://).
	ProtocolVersion int
}

// SubscribeFilter returns the MQTT filter that reads every simulated sensor
// back: Topic with ${sensor} replaced by "+".
func (s *SimulatorSource) SubscribeFilter() string {
	return strings.ReplaceAll(s.Topic, "${sensor}", "+")
}

// CSV configures format "csv".
type CSV struct {
	// Header says the first line names the columns; default true.
	Header bool
	// Columns names the columns; required when Header is false, and when set
	// with a header it overrides it.
	Columns []string
	// Delimiter is one character, default ','.
	Delimiter rune
}

// Timestamp says which field carries event time and how to read it.
type Timestamp struct {
	Field string
	// Unit is the epoch unit of a numeric field: "s", "ms" (default), "us"
	// or "ns". Empty when Layout is set.
	Unit string
	// Layout is a Go time layout for a string field, or "rfc3339"; exclusive
	// with Unit.
	Layout string
}

// Watermark configures the bounded out-of-orderness watermark. Zero
// IdleTimeout and MaxFutureSkew disable those checks.
type Watermark struct {
	MaxOutOfOrderness time.Duration
	IdleTimeout       time.Duration
	MaxFutureSkew     time.Duration
	// Punctuation names a field that marks a message as a watermark rather
	// than a reading (Flink's punctuated watermarks): a message carrying it
	// moves the watermark to its value (ms, in the timestamp's unit rules)
	// and is not processed as a reading. When set, readings no longer move
	// the watermark by themselves: upstream decides event-time progress, as
	// a gateway sending heartbeats or a replay with explicit watermarks does.
	// "" (default) means bounded out-of-orderness from the readings.
	Punctuation string
	// HoldAfterResume holds the watermark after the broker resumed the
	// source's session, while the messages it stored arrive (a broker may
	// send them behind newer ones): until this long of the readings'
	// arrival time passed without one behind the watermark, at most
	// watermark.MaxHoldFactor times as long. 0 (default): no hold.
	HoldAfterResume time.Duration
}

var (
	formatBlocks = []hcl.BlockHeaderSchema{{Type: "csv"}, {Type: "timestamp"}, {Type: "watermark"}}
	formats      = []string{"json", "csv", "raw", FormatSparkplugB}
)

// FormatSparkplugB reads Sparkplug B edge nodes' messages: each metric of
// a birth, data or death message is one reading with the fields
// SparkplugFields names, stamped by SparkplugTimestamp.
const FormatSparkplugB = "sparkplug_b"

// SparkplugTimestamp is the event time of a Sparkplug reading: the
// metric's timestamp, else its payload's (Unix ms).
var SparkplugTimestamp = Timestamp{Field: "timestamp", Unit: "ms"}

// decodeSources decodes every source block, in order.
func (d *decoder) decodeSources(blocks hcl.Blocks, broker *Broker) []*Source {
	var out []*Source
	seen := map[string]*Source{}
	for _, b := range blocks {
		typ, name := b.Labels[0], b.Labels[1]
		if !d.checkTypeLabel(b, "source", sourceTypes) || !d.checkNameLabel(b, 1) {
			continue
		}
		if prev := seen[name]; prev != nil {
			d.errorf(b.LabelRanges[1], "Duplicate source name",
				"A source named %q is already declared at %s; source names must be unique.", name, prev.DeclRange)
			continue
		}
		s := &Source{Type: typ, Name: name, DeclRange: b.DefRange}
		seen[name] = s
		switch typ {
		case SourceMQTT:
			d.decodeMQTTSource(b, s, broker)
		case SourceFile:
			a, c := d.content(b, []string{"path", "format"}, formatBlocks...)
			a.require("path")
			s.File = &FileSource{Path: a.str("path", noVars, "")}
			d.decodeFormat(a, c, s)
		case SourceSimulator:
			d.decodeSimulator(b, s, broker)
		}
		out = append(out, s)
	}
	return out
}

// checkTypeLabel reports an unknown first label of block (kind "source" or
// "sink").
func (d *decoder) checkTypeLabel(b *hcl.Block, kind string, types []string) bool {
	for _, t := range types {
		if b.Labels[0] == t {
			return true
		}
	}
	d.errorf(b.LabelRanges[0], "Unknown "+kind+" type", "There is no %s type %q; use one of %s.%s",
		kind, b.Labels[0], quoteList(types), didYouMean(b.Labels[0], types))
	return false
}

// checkNameLabel reports a label i that cannot be used in a reference.
func (d *decoder) checkNameLabel(b *hcl.Block, i int) bool {
	if hclsyntax.ValidIdentifier(b.Labels[i]) {
		return true
	}
	d.errorf(b.LabelRanges[i], "Invalid name",
		"%q cannot be referenced; a name starts with a letter and holds letters, digits, \"_\" and \"-\".", b.Labels[i])
	return false
}

func (d *decoder) decodeMQTTSource(b *hcl.Block, s *Source, broker *Broker) {
	a, c := d.content(b, []string{"broker", "client_id", "topics", "qos", "username", "password", "clean_session", "keepalive", "format", "connections", "dedup_key", "dedup_window", "max_message_size", "max_inflight", "protocol_version", "session_expiry", "receive_maximum", "request_rebirth"},
		append([]hcl.BlockHeaderSchema{{Type: "reconnect"}, tlsBlock}, formatBlocks...)...)
	a.require("broker", "topics")
	m := &MQTTSource{
		Broker:       a.str("broker", noVars, ""),
		ClientID:     a.str("client_id", deviceIDVars, "eddy-${device_id}-"+s.Name),
		QoS:          int(a.integer("qos", 1, 0, 2)),
		Username:     a.str("username", noVars, ""),
		Password:     a.str("password", noVars, ""),
		CleanSession: a.boolean("clean_session", false),
		KeepAlive:    a.duration("keepalive", 30*time.Second),
		ReconnectMin: time.Second,
		ReconnectMax: time.Minute,
		TLS:          d.decodeTLS(c.Blocks, false),
		Connections:  int(a.integer("connections", 1, 1, 16)),
		MaxInflight:  int(a.integer("max_inflight", DefaultMaxInflight, 0, 65535)),
	}
	m.MaxMessageSize, m.maxMessageSizeAt = a.messageSize()
	s.MQTT = m
	if m.Connections > 1 && m.Broker == Embedded {
		d.errorf(a.rangeOf("connections"), "Argument does not apply",
			"The embedded broker hands messages to Eddy in its publish hook; \"connections\" is for an external broker.")
	}
	if a.has("max_inflight") && m.Broker == Embedded {
		d.errorf(a.rangeOf("max_inflight"), "Argument does not apply",
			"\"max_inflight\" is an external broker's in-flight window; the embedded broker hands messages to Eddy in its publish hook.")
	}
	d.checkBroker(a, m.Broker, broker)
	d.decodeSourceV5(a, m)
	topics, ranges, ok := a.strList("topics", deviceIDVars)
	if ok && len(topics) == 0 {
		d.errorf(a.rangeOf("topics"), "Empty topic list", "\"topics\" needs at least one MQTT filter, e.g. topics = [\"sensors/+/telemetry\"].")
	}
	for i, t := range topics {
		if err := validateTopicFilter(t); err != nil {
			d.errorf(ranges[i], "Invalid topic filter", "%q: %s.", t, strings.TrimPrefix(err.Error(), "config: "))
		} else if m.Connections > 1 && strings.HasPrefix(t, "$share/") {
			d.errorf(ranges[i], "Shared subscription twice",
				"With connections = %d the source subscribes to every topic as $share/GROUP/TOPIC itself; write the filter without \"$share/...\", or remove \"connections\".", m.Connections)
		}
	}
	m.Topics = topics
	if a.has("keepalive") && m.KeepAlive < time.Second {
		d.errorf(a.rangeOf("keepalive"), "Value out of range", "\"keepalive\" must be at least 1s; MQTT counts it in whole seconds.")
	}
	if rb := d.single(c.Blocks, "reconnect"); rb != nil {
		ra, _ := d.content(rb, []string{"min", "max"})
		m.ReconnectMin = ra.duration("min", m.ReconnectMin)
		m.ReconnectMax = ra.duration("max", m.ReconnectMax)
		if m.ReconnectMin <= 0 {
			d.errorf(ra.rangeOf("min"), "Value out of range", "The reconnect \"min\" must be positive, e.g. \"1s\".")
		} else if m.ReconnectMax < m.ReconnectMin {
			d.errorf(ra.rangeOf("max"), "Value out of range", "The reconnect \"max\" (%s) must be at least \"min\" (%s).", m.ReconnectMax, m.ReconnectMin)
		}
	}
	d.decodeFormat(a, c, s)
	d.decodeDedup(a, s)
	d.decodeSparkplug(a, s)
}

// decodeSparkplug checks the settings of an MQTT source with format
// sparkplug_b and reads request_rebirth.
func (d *decoder) decodeSparkplug(a attrs, s *Source) {
	m := s.MQTT
	m.RequestRebirth = a.boolean("request_rebirth", false)
	if s.Format != FormatSparkplugB {
		if a.has("request_rebirth") {
			d.errorf(a.rangeOf("request_rebirth"), "Argument does not apply",
				"\"request_rebirth\" asks Sparkplug edge nodes for their births; this source's format is %q, set format = %q.", s.Format, FormatSparkplugB)
		}
		return
	}
	if m.Connections > 1 {
		// A shared subscription spreads a node's messages over
		// connections, and their order with them: seq would seem to
		// have gaps.
		d.errorf(a.rangeOf("connections"), "Argument does not apply",
			"Sparkplug B readings are checked in seq order, which a shared subscription over several connections does not keep; remove \"connections\".")
	}
	for i, t := range m.Topics {
		if !strings.HasPrefix(t, "spBv1.0/") && !strings.HasPrefix(t, "#") && !strings.HasPrefix(t, "+/") {
			d.warnf(a.rangeOf("topics"), "Topic outside the Sparkplug namespace",
				"topics[%d] = %q matches no Sparkplug B topic, which all start with \"spBv1.0/\"; e.g. topics = [\"spBv1.0/GROUP/#\"]. Its messages are dead-lettered as not_sparkplug.", i, t)
		}
	}
}

// decodeSourceV5 decodes protocol_version, session_expiry and
// receive_maximum of an MQTT source: 5 by default where the source speaks
// it (tcp:// and ssl:// brokers), 4 on ws:// and wss://.
func (d *decoder) decodeSourceV5(a attrs, m *MQTTSource) {
	wsBroker := strings.HasPrefix(m.Broker, "ws://") || strings.HasPrefix(m.Broker, "wss://")
	if m.Broker == Embedded {
		m.ProtocolVersion = 4
		if a.has("protocol_version") {
			d.errorf(a.rangeOf("protocol_version"), "Argument does not apply",
				"The embedded broker hands messages to Eddy in its publish hook, with no MQTT connection; remove \"protocol_version\".")
		}
	} else {
		m.ProtocolVersion = d.protocolVersionOf(a, wsBroker, "A source on a ws:// or wss:// broker speaks MQTT 3.1.1 only")
	}
	m.SessionExpiry = a.duration("session_expiry", 0)
	m.ReceiveMaximum = int(a.integer("receive_maximum", DefaultReceiveMaximum, 1, 65535))
	const maxInterval = (1<<32 - 2) * time.Second
	for _, name := range []string{"session_expiry", "receive_maximum"} {
		if !a.has(name) {
			continue
		}
		switch {
		case m.Broker == Embedded:
			d.errorf(a.rangeOf(name), "Argument does not apply",
				"%q is for an external broker at MQTT 5; the embedded broker hands messages to Eddy in its publish hook. Remove it.", name)
		case m.ProtocolVersion != 5:
			d.errorf(a.rangeOf(name), "Argument does not apply",
				"%q is an MQTT 5 property; with protocol_version = 4 (or a ws:// broker) the source speaks MQTT 3.1.1. Remove it, or remove protocol_version = 4.", name)
		case name == "session_expiry" && (m.SessionExpiry < time.Second || m.SessionExpiry > maxInterval):
			d.errorf(a.rangeOf(name), "Value out of range",
				"\"session_expiry\" must be at least \"1s\" (and below 136 years), e.g. session_expiry = \"1h\"; remove it for a session that never expires.")
		}
	}
}

// protocolVersionOf decodes protocol_version of a source or simulator: 5
// by default, 4 when ws (a ws:// or wss:// broker, where only 3.1.1 is
// spoken; wsOnly says so in the diagnostic for 5 there).
func (d *decoder) protocolVersionOf(a attrs, ws bool, wsOnly string) int {
	def := 5
	if ws {
		def = 4
	}
	if !a.has("protocol_version") {
		return def
	}
	f, ok := a.number("protocol_version", "5")
	if !ok {
		return def
	}
	n, acc := f.Int64()
	switch {
	case !f.IsInt() || acc != 0 || (n != 4 && n != 5):
		d.errorf(a.rangeOf("protocol_version"), "Invalid protocol version",
			"\"protocol_version\" is 5 (MQTT 5, the default: it falls back to 3.1.1 when the broker refuses it) or 4 (MQTT 3.1.1); got %s. Remove it, or set protocol_version = 4 for a broker that speaks 3.1.1 only.", f.Text('g', 10))
		return def
	case n == 5 && ws:
		d.errorf(a.rangeOf("protocol_version"), "Protocol version not supported here",
			"%s; set protocol_version = 4 or remove it, or use a tcp:// or ssl:// URL for MQTT 5.", wsOnly)
		return 4
	}
	return int(n)
}

// decodeDedup reads dedup_key and dedup_window of an MQTT source whose
// format is known.
func (d *decoder) decodeDedup(a attrs, s *Source) {
	m := s.MQTT
	m.DedupKey = a.str("dedup_key", noVars, "")
	m.DedupWindow = a.duration("dedup_window", 10*time.Minute)
	if a.has("dedup_key") {
		switch {
		case m.DedupKey == "" || slices.Contains(strings.Split(m.DedupKey, "."), ""):
			d.errorf(a.rangeOf("dedup_key"), "Invalid field path",
				"%q is not a field path; name the payload field that carries the message id, e.g. dedup_key = \"id\" or \"meta.seq\".", m.DedupKey)
		case s.Format != "json":
			d.errorf(a.rangeOf("dedup_key"), "Argument does not apply",
				"\"dedup_key\" reads a field of a JSON payload; this source's format is %q.", s.Format)
		}
	}
	if a.has("dedup_window") {
		switch {
		case !a.has("dedup_key"):
			d.errorf(a.rangeOf("dedup_window"), "Argument does not apply",
				"\"dedup_window\" is how long the ids of dedup_key are remembered; set dedup_key too.")
		case m.DedupWindow == 0:
			d.errorf(a.rangeOf("dedup_window"), "Value out of range", "\"dedup_window\" must be positive; %s.", durationHint)
		}
	}
}

// checkBroker validates a broker attribute of a source or sink: a URL, or
// "embedded" when there is a broker block.
func (d *decoder) checkBroker(a attrs, value string, broker *Broker) {
	if value == "" {
		return
	}
	if value == Embedded {
		if broker == nil {
			d.errorf(a.rangeOf("broker"), "No embedded broker",
				"broker = \"embedded\" needs a top-level broker block, e.g. broker { listen = \"127.0.0.1:1883\" }.")
		}
		return
	}
	if err := validateBrokerURL(value); err != nil {
		d.errorf(a.rangeOf("broker"), "Invalid broker URL",
			"%q: %s; use \"tcp://host:1883\", \"ssl://host:8883\", \"ws://host/path\", \"wss://host/path\" or \"embedded\".",
			value, strings.TrimPrefix(err.Error(), "config: "))
	}
}

// decodeFormat decodes format, csv, timestamp and watermark of a source.
func (d *decoder) decodeFormat(a attrs, c *hcl.BodyContent, s *Source) {
	s.Format = a.enum("format", formats, "json")
	if s.Format == FormatSparkplugB && s.MQTT == nil {
		d.errorf(a.rangeOf("format"), "Unsupported format",
			"%q reads Sparkplug B messages from an MQTT broker; a %s source has no MQTT topics. Use format \"json\", \"csv\" or \"raw\".", FormatSparkplugB, s.Type)
	}
	if cb := d.single(c.Blocks, "csv"); cb != nil {
		ca, _ := d.content(cb, []string{"header", "columns", "delimiter"})
		csv := &CSV{Header: ca.boolean("header", true), Delimiter: ','}
		csv.Columns, _, _ = ca.strList("columns", noVars)
		if delim := ca.str("delimiter", noVars, ","); len([]rune(delim)) != 1 || delim == "\n" || delim == "\r" || delim == "\"" {
			d.errorf(ca.rangeOf("delimiter"), "Invalid delimiter", "The delimiter must be one character other than a quote or newline, e.g. \",\" or \";\".")
		} else {
			csv.Delimiter = []rune(delim)[0]
		}
		if !csv.Header && len(csv.Columns) == 0 {
			d.errorf(cb.DefRange, "Missing columns", "Without a header line, set columns = [\"...\"] to name the fields.")
		}
		if s.Format != "csv" {
			d.errorf(cb.DefRange, "Unexpected csv block", "A csv block applies only to format = \"csv\"; this source's format is %q.", s.Format)
		}
		s.CSV = csv
	} else if s.Format == "csv" {
		s.CSV = &CSV{Header: true, Delimiter: ','}
	}
	if tb := d.single(c.Blocks, "timestamp"); tb != nil {
		ta, _ := d.content(tb, []string{"field", "unit", "layout"})
		ta.require("field")
		ts := &Timestamp{Field: ta.str("field", noVars, ""), Layout: ta.str("layout", noVars, "")}
		ts.Unit = ta.enum("unit", []string{"s", "ms", "us", "ns"}, "ms")
		switch {
		case ta.has("unit") && ta.has("layout"):
			d.errorf(ta.rangeOf("layout"), "Conflicting arguments",
				"Set \"unit\" for a numeric epoch timestamp or \"layout\" for a string one, not both.")
		case ts.Layout != "":
			ts.Unit = ""
			if ts.Layout != "rfc3339" && !isTimeLayout(ts.Layout) {
				d.errorf(ta.rangeOf("layout"), "Invalid time layout",
					"%q has no Go reference-time elements; write the layout of Mon Jan 2 15:04:05 MST 2006 (e.g. \"2006-01-02 15:04:05\"), or \"rfc3339\".", ts.Layout)
			}
		}
		switch s.Format {
		case "raw":
			d.errorf(tb.DefRange, "Unexpected timestamp block", "A raw payload has no fields; use format \"json\" or \"csv\" for event time.")
		case FormatSparkplugB:
			d.errorf(tb.DefRange, "Unexpected timestamp block",
				"Sparkplug B readings carry their event time in the field \"timestamp\" (the metric's, else the payload's, in ms); remove the timestamp block.")
		}
		s.Timestamp = ts
	} else if s.Format == FormatSparkplugB {
		ts := SparkplugTimestamp
		s.Timestamp = &ts
	}
	d.decodeWatermark(c.Blocks, s)
}

func (d *decoder) decodeWatermark(blocks hcl.Blocks, s *Source) {
	wb := d.single(blocks, "watermark")
	if wb == nil {
		return
	}
	wa, _ := d.content(wb, []string{"max_out_of_orderness", "idle_timeout", "max_future_skew", "punctuation", "hold_after_resume"})
	s.Watermark = Watermark{
		MaxOutOfOrderness: wa.duration("max_out_of_orderness", 0),
		IdleTimeout:       wa.duration("idle_timeout", 0),
		MaxFutureSkew:     wa.duration("max_future_skew", 0),
		Punctuation:       wa.str("punctuation", noVars, ""),
		HoldAfterResume:   wa.duration("hold_after_resume", 0),
	}
	if wa.has("hold_after_resume") && s.File != nil {
		// Only a broker resumes a session; a file has nothing to hold for.
		d.errorf(wa.rangeOf("hold_after_resume"), "Unsupported argument",
			"hold_after_resume holds the watermark after an MQTT broker resumed the source's session; a file source has none. Remove it.")
	}
	if s.Watermark.Punctuation != "" && wa.has("max_out_of_orderness") {
		d.errorf(wa.rangeOf("punctuation"), "Conflicting watermark settings",
			"With punctuation the watermark comes from marker messages only; remove max_out_of_orderness, or punctuation.")
	}
	if s.Timestamp == nil {
		d.errorf(wb.DefRange, "Watermark without timestamp",
			"Watermarks follow event time; add a timestamp block naming the field that carries it.")
	}
}

// isTimeLayout reports whether layout holds at least one Go reference-time
// element, by formatting a fixed instant with it.
func isTimeLayout(layout string) bool {
	return time.Date(2001, 3, 4, 5, 6, 7, 0, time.UTC).Format(layout) != layout
}

func (d *decoder) decodeSimulator(b *hcl.Block, s *Source, broker *Broker) {
	a, c := d.content(b, []string{"broker", "topic", "devices", "rate", "seed", "out_of_order", "late", "malformed", "max_readings", "protocol_version"},
		hcl.BlockHeaderSchema{Type: "watermark"})
	sim := &SimulatorSource{
		Broker:      a.str("broker", noVars, Embedded),
		Topic:       a.str("topic", simulatorVars, "sensors/${sensor}/telemetry"),
		Devices:     int(a.integer("devices", 10, 1, 1_000_000)),
		Rate:        a.float("rate", 20, 0, 1e9),
		Seed:        a.integer("seed", 0, -1<<63, 1<<63-1),
		OutOfOrder:  a.float("out_of_order", 0.1, 0, 1),
		Late:        a.float("late", 0.01, 0, 1),
		Malformed:   a.float("malformed", 0.005, 0, 1),
		MaxReadings: a.integer("max_readings", 0, 0, 1<<63-1),
	}
	s.Simulator, s.Format = sim, "json"
	s.Timestamp = &Timestamp{Field: "ts", Unit: "ms"}
	sim.ProtocolVersion = d.protocolVersionOf(a, strings.HasPrefix(sim.Broker, "ws://") || strings.HasPrefix(sim.Broker, "wss://"),
		"The simulator on a ws:// or wss:// broker publishes at MQTT 3.1.1 only")
	if sim.Broker == Embedded && broker == nil {
		d.errorf(a.rangeOf("broker"), "No embedded broker",
			"The simulator publishes to the embedded broker by default, which needs a top-level broker block, e.g. broker { listen = \"127.0.0.1:1883\" }; or set broker to a URL.")
	} else {
		d.checkBroker(a, sim.Broker, broker)
	}
	if a.has("rate") && sim.Rate <= 0 {
		d.errorf(a.rangeOf("rate"), "Value out of range", "\"rate\" is readings per second over all devices and must be positive.")
	}
	if err := validateTopicName(expand(sim.Topic, "x")); err != nil {
		d.errorf(a.rangeOf("topic"), "Invalid topic", "%q: %s.", sim.Topic, strings.TrimPrefix(err.Error(), "config: "))
	} else if err := validateTopicFilter(sim.SubscribeFilter()); err != nil {
		d.errorf(a.rangeOf("topic"), "Invalid topic",
			"${sensor} must be a whole topic level, as in \"sensors/${sensor}/telemetry\", so the agent can subscribe to %q.", sim.SubscribeFilter())
	}
	d.decodeWatermark(c.Blocks, s)
}

// expand replaces ${sensor} with value, to check a simulator topic.
func expand(template, value string) string {
	return Expand(template, map[string]string{"sensor": value})
}
