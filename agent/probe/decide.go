package probe

import (
	"fmt"
	"slices"
)

// Level grades a finding.
type Level string

const (
	// OK: the configuration fits what the probe observed.
	OK Level = "ok"
	// Warn: worth changing, but nothing is lost or stalled as configured.
	Warn Level = "warn"
	// Fail: as configured, the agent will lose results or readings, or
	// stall, on this broker.
	Fail Level = "fail"
)

// Finding is one conclusion of a probe, with what to do about it.
type Finding struct {
	Level Level  `json:"level"`
	Text  string `json:"text"`
}

// Trial is one burst of test messages: Window messages published back to
// back at QoS, without waiting for an acknowledgement in between, and what
// came back.
type Trial struct {
	QoS    byte `json:"qos"`
	Window int  `json:"window"`
	// Acked counts PUBACKs (QoS 1) or PUBRECs (QoS 2); Completed counts
	// PUBCOMPs; Pubacks counts PUBACKs answering QoS 2 PUBLISHes (a broker
	// that downgrades QoS 2 to QoS 1).
	Acked     int `json:"acked"`
	Completed int `json:"completed"`
	Pubacks   int `json:"pubacks_to_qos2,omitempty"`
	// Arrived counts distinct test messages the probe's subscriber got;
	// Duplicates the repeats beyond the first of each.
	Arrived    int `json:"arrived"`
	Duplicates int `json:"duplicates"`
	// Closed: the broker closed the connection during the trial, or left
	// a message unacknowledged for 10 s (a stalled window).
	Closed bool `json:"closed"`
}

// Passed reports whether every message of t arrived exactly once and the
// connection stayed up.
func (t Trial) Passed() bool {
	return !t.Closed && t.Arrived == t.Window && t.Duplicates == 0
}

// NextWindow returns the next window to try after trials (all at one QoS,
// in the order run), or false when the window is known: the ladder
// 1, 2, 5, 10, 20, 50, … up to limit, and after the first failing step a
// bisection between the largest passing window and the smallest failing
// one, so a broker's limit is found exactly (mosquitto's default: 20).
func NextWindow(trials []Trial, limit int) (int, bool) {
	pass, fail := 0, 0
	for _, t := range trials {
		if t.Passed() {
			pass = max(pass, t.Window)
		} else if fail == 0 || t.Window < fail {
			fail = t.Window
		}
	}
	if fail == 0 {
		for _, w := range ladder(limit) {
			if w > pass {
				return w, true
			}
		}
		return 0, false
	}
	if fail-pass <= 1 {
		return 0, false
	}
	return pass + (fail-pass)/2, true
}

// ladder is 1, 2, 5, 10, 20, 50, … below limit, then limit.
func ladder(limit int) []int {
	var l []int
	for d := 1; ; d *= 10 {
		for _, m := range []int{1, 2, 5} {
			if w := m * d; w < limit {
				l = append(l, w)
			} else {
				return append(l, limit)
			}
		}
	}
}

// Window is what trials at one QoS showed: the largest window that passed,
// and whether a larger one failed (Limited) or none did up to the cap
// (then the real limit is Max or more).
type Window struct {
	Max     int  `json:"max"`
	Limited bool `json:"limited"`
}

// WindowOf derives the window from trials at one QoS.
func WindowOf(trials []Trial) Window {
	var w Window
	for _, t := range trials {
		if t.Passed() {
			w.Max = max(w.Max, t.Window)
		} else {
			w.Limited = true
		}
	}
	return w
}

// QoS2Mode is how a broker answers QoS 2 PUBLISHes.
type QoS2Mode string

const (
	// QoS2Unknown: not tried (the probe stopped before).
	QoS2Unknown QoS2Mode = ""
	// QoS2OK: PUBREC, then PUBCOMP after PUBREL.
	QoS2OK QoS2Mode = "ok"
	// QoS2Downgraded: PUBACK, as to QoS 1 (RabbitMQ 3.10's MQTT plugin).
	QoS2Downgraded QoS2Mode = "downgraded"
	// QoS2Refused: the connection closed right after the PUBLISH without an
	// answer, MQTT 3.1.1's way to refuse a QoS (mosquitto with max_qos 1,
	// AWS IoT Core, Azure IoT Hub).
	QoS2Refused QoS2Mode = "refused"
)

// SizeTrial is one message of Bytes payload bytes at QoS 1.
type SizeTrial struct {
	Bytes   int  `json:"bytes"`
	Acked   bool `json:"acked"`
	Arrived bool `json:"arrived"`
	Closed  bool `json:"closed"`
}

// TopicCheck is the publish of one test message to the sink's own topic.
type TopicCheck struct {
	Topic string `json:"topic"`
	// SubscribeRefused: the probe's subscription to Topic was refused
	// (SUBACK 0x80), so arrival could not be observed.
	SubscribeRefused bool `json:"subscribe_refused"`
	Acked            bool `json:"acked"`
	Arrived          bool `json:"arrived"`
	Closed           bool `json:"closed"`
}

// UpstreamConfig is what the sink is configured with.
type UpstreamConfig struct {
	QoS         int
	MaxInflight int
	// MaxPayload is the sink's max_payload; 0 = none.
	MaxPayload int64
}

// UpstreamObservations is everything the upstream probe saw.
type UpstreamObservations struct {
	QoS1  []Trial     `json:"qos1_trials"`
	QoS2  []Trial     `json:"qos2_trials"`
	Mode  QoS2Mode    `json:"qos2"`
	Sizes []SizeTrial `json:"sizes"`
	// SizeCap is the largest payload tried when none was refused.
	SizeCap int         `json:"size_cap"`
	Topic   *TopicCheck `json:"topic_check,omitempty"`
}

// UpstreamVerdict is the decision: what the broker takes and which settings
// fit it.
type UpstreamVerdict struct {
	MaxQoS int `json:"max_qos"`
	// Window is the in-flight window at the QoS the sink should use.
	Window Window `json:"window"`
	// MaxPayload is the largest payload that arrived; PayloadLimited says a
	// larger one was refused or dropped.
	MaxPayload     int  `json:"max_payload"`
	PayloadLimited bool `json:"payload_limited"`
	// Settings to use in the sink block.
	UseQoS         int       `json:"use_qos"`
	UseMaxInflight int       `json:"use_max_inflight"`
	UseMaxPayload  int64     `json:"use_max_payload,omitempty"`
	Findings       []Finding `json:"findings"`
	// Advice is for the broker's side.
	Advice []string `json:"broker_advice,omitempty"`
}

// Fit reports whether no finding is a Fail.
func Fit(fs []Finding) bool {
	return !slices.ContainsFunc(fs, func(f Finding) bool { return f.Level == Fail })
}

// DecideUpstream turns the observations of a sink's broker into settings.
// Pure: the same observations always give the same verdict.
//
// The rules: QoS 2 is usable only when the broker answered it with
// PUBREC/PUBCOMP; a sink at qos = 2 on a broker that refuses it never
// delivers (the broker closes each connection), and on one that downgrades
// it stalls (a PUBACK ends the QoS 2 session). The window is the largest
// burst that arrived whole at the QoS to use; a max_inflight above it
// loses results silently on brokers that acknowledge and drop (mosquitto)
// and is a Fail. A max_payload above the largest payload that arrived is a
// Fail; none set on a broker that refused a payload below the probe's cap
// is a Warn (results that large would be lost). A refused or dropped
// publish to the sink's topic is a Fail.
func DecideUpstream(c UpstreamConfig, o UpstreamObservations) UpstreamVerdict {
	v := UpstreamVerdict{MaxQoS: 1, UseQoS: c.QoS, UseMaxInflight: c.MaxInflight, UseMaxPayload: c.MaxPayload}
	add := func(l Level, format string, a ...any) {
		v.Findings = append(v.Findings, Finding{Level: l, Text: fmt.Sprintf(format, a...)})
	}
	switch o.Mode {
	case QoS2OK:
		v.MaxQoS = 2
		add(OK, "QoS 2: the broker answers PUBREC and PUBCOMP")
	case QoS2Downgraded:
		if c.QoS == 2 {
			add(Fail, "QoS 2: the broker answers a QoS 2 PUBLISH with PUBACK (it downgrades to QoS 1); with qos = 2 the sink stalls: set qos = 1")
		} else {
			add(OK, "QoS 2: the broker downgrades it to QoS 1 (PUBACK); qos = 1 is right")
		}
		v.UseQoS = 1
	case QoS2Refused:
		if c.QoS == 2 {
			add(Fail, "QoS 2: the broker closes the connection right after a QoS 2 PUBLISH (it refuses QoS 2); with qos = 2 nothing is delivered: set qos = 1")
		} else {
			add(OK, "QoS 2: refused by the broker (it closes the connection); qos = 1 is right")
		}
		v.UseQoS = 1
	}
	trials := o.QoS1
	if v.UseQoS == 2 {
		trials = o.QoS2
	}
	v.Window = WindowOf(trials)
	switch {
	case v.Window.Max == 0:
		add(Fail, "in-flight window: not even one QoS %d message arrived on the probe's topic", v.UseQoS)
	case v.Window.Limited && c.MaxInflight > v.Window.Max:
		add(Fail, "in-flight window: the broker loses or refuses messages beyond %d in flight at QoS %d; max_inflight = %d would lose results: set max_inflight = %d (or raise the broker's limit, mosquitto: max_inflight_messages)",
			v.Window.Max, v.UseQoS, c.MaxInflight, v.Window.Max)
		v.UseMaxInflight = v.Window.Max
	case v.Window.Limited:
		add(OK, "in-flight window: %d at QoS %d; max_inflight = %d fits", v.Window.Max, v.UseQoS, c.MaxInflight)
	case c.MaxInflight > v.Window.Max:
		add(Warn, "in-flight window: %d or more at QoS %d (tried no further); max_inflight = %d is untested", v.Window.Max, v.UseQoS, c.MaxInflight)
	default:
		add(OK, "in-flight window: %d or more at QoS %d (tried no further); max_inflight = %d fits", v.Window.Max, v.UseQoS, c.MaxInflight)
	}
	for _, s := range o.Sizes {
		if s.Acked && s.Arrived && !s.Closed {
			v.MaxPayload = max(v.MaxPayload, s.Bytes)
		} else {
			v.PayloadLimited = true
		}
	}
	switch {
	case len(o.Sizes) == 0:
	case v.PayloadLimited && c.MaxPayload > int64(v.MaxPayload):
		add(Fail, "payload size: the broker takes %d bytes but not the next size tried; max_payload = %d would lose larger results: set max_payload = %d", v.MaxPayload, c.MaxPayload, v.MaxPayload)
		v.UseMaxPayload = int64(v.MaxPayload)
	case v.PayloadLimited && c.MaxPayload == 0:
		add(Warn, "payload size: the broker takes %d bytes but not the next size tried; set max_payload = %d so a larger result is dead-lettered, not lost", v.MaxPayload, v.MaxPayload)
		v.UseMaxPayload = int64(v.MaxPayload)
	case v.PayloadLimited:
		add(OK, "payload size: the broker takes %d bytes; max_payload = %d fits", v.MaxPayload, c.MaxPayload)
	default:
		add(OK, "payload size: the broker takes %d bytes (the largest tried)", v.MaxPayload)
	}
	if v.Window.Limited && v.Window.Max < 1000 {
		v.Advice = append(v.Advice, "the delivery rate is about window ÷ round trip: for more, raise the broker's per-client in-flight limit (mosquitto.conf: max_inflight_messages 1000), probe again, and set max_inflight to the window found")
	}
	if o.Mode == QoS2Refused || o.Mode == QoS2Downgraded {
		v.Advice = append(v.Advice, "the broker takes QoS 1 only (mosquitto: max_qos; RabbitMQ, AWS IoT Core and Azure IoT Hub: always): qos = 1 stays exactly once end to end for a consumer that drops repeated ids (repeats only of the unacknowledged window)")
	}
	if v.PayloadLimited {
		v.Advice = append(v.Advice, "the payload limit is the broker's (mosquitto.conf: message_size_limit, max_packet_size)")
	}
	if t := o.Topic; t != nil {
		switch {
		case t.Closed:
			add(Fail, "topic %s: the broker closes the connection on a publish to it (not allowed for this client)", t.Topic)
		case !t.Acked:
			add(Fail, "topic %s: the publish to it was not acknowledged", t.Topic)
		case t.SubscribeRefused:
			add(Warn, "topic %s: publish acknowledged, but the probe may not subscribe to it, so its delivery was not seen (a broker that drops refused publishes, as mosquitto does, looks the same)", t.Topic)
		case !t.Arrived:
			add(Fail, "topic %s: publish acknowledged but never delivered: the broker drops it (mosquitto does so for a topic its ACL denies this client); allow it for this client (mosquitto drops deliveries to a subscriber its ACL denies the same way: if only subscribing is denied, results are fine)", t.Topic)
		default:
			add(OK, "topic %s: allowed", t.Topic)
		}
	}
	return v
}

// SourceConn is what one of a source's connections saw.
type SourceConn struct {
	ClientID string `json:"client_id"`
	// Shared: its subscription is $share/GROUP/FILTER.
	Shared bool `json:"shared"`
	// Granted is the SUBACK's QoS per filter (0x80 = 128: refused).
	Granted []int `json:"granted"`
	// Received counts the test messages it got (all filters).
	Received int `json:"received"`
}

// SourceObservations is everything the source probe saw: Published test
// messages went out, and each connection reports what it got. Plain is a
// connection with a plain (unshared) subscription to the same filters,
// which tells a message that was never delivered from one a shared group
// lost; nil when the source has one connection (its only connection is
// plain).
type SourceObservations struct {
	Filters   []string     `json:"filters"`
	QoS       int          `json:"qos"`
	Published int          `json:"published"`
	Conns     []SourceConn `json:"connections"`
	Plain     *SourceConn  `json:"plain,omitempty"`
	// SharedDuplicates counts test messages that arrived on more than one
	// shared connection.
	SharedDuplicates int `json:"shared_duplicates"`
	// PublishRefused: the probe's test publish was refused (closed).
	PublishRefused bool `json:"publish_refused"`
}

// SourceVerdict is the decision about a source.
type SourceVerdict struct {
	// Shared is "ok", "literal", "not_shared", "untested" or "" (one
	// connection).
	Shared   string    `json:"shared,omitempty"`
	Findings []Finding `json:"findings"`
}

// DecideSource turns what a source's connections saw into findings. Pure.
//
// The rules: a refused subscription (0x80) is a Fail (that filter ingests
// nothing); a granted QoS below the configured one is a Warn. With one
// connection, a test message that does not arrive is a Warn (the probe may
// be unable to publish there). With several: when the plain subscription
// got the messages and no shared connection did, the broker takes
// $share/GROUP/FILTER as a literal topic filter (RabbitMQ 3.10) and the
// source ingests nothing: a Fail, use connections = 1; when the shared
// connections got messages more than once, the broker does not share
// (each connection gets every message): a Fail; when each message arrived
// once across them, shared subscriptions work.
func DecideSource(o SourceObservations) SourceVerdict {
	var v SourceVerdict
	add := func(l Level, format string, a ...any) {
		v.Findings = append(v.Findings, Finding{Level: l, Text: fmt.Sprintf(format, a...)})
	}
	conns := o.Conns
	if o.Plain != nil {
		conns = append([]SourceConn{*o.Plain}, conns...)
	}
	for i, f := range o.Filters {
		var refused, low []string
		for _, c := range conns {
			if i >= len(c.Granted) {
				continue
			}
			switch g := c.Granted[i]; {
			case g >= 0x80:
				refused = append(refused, c.ClientID)
			case g < o.QoS:
				low = append(low, fmt.Sprintf("%s: QoS %d", c.ClientID, g))
			}
		}
		switch {
		case len(refused) > 0:
			add(Fail, "filter %s: subscription refused by the broker (%v): the source would ingest nothing from it; check the broker's ACL for this client", f, refused)
		case len(low) > 0:
			add(Warn, "filter %s: granted below the configured qos = %d (%v)", f, o.QoS, low)
		default:
			add(OK, "filter %s: subscribed, QoS %d granted", f, o.QoS)
		}
	}
	if o.PublishRefused {
		add(Warn, "the probe's test message was refused by the broker (connection closed): delivery not tested; allow this client to publish to the filters' topics, or test with a sensor")
		if o.Plain != nil {
			v.Shared = "untested"
		}
		return v
	}
	if o.Published == 0 {
		return v
	}
	if o.Plain == nil {
		c := o.Conns[0]
		switch {
		case c.Received >= o.Published:
			add(OK, "%s: every test message arrived (%d of %d)", c.ClientID, c.Received, o.Published)
		default:
			add(Warn, "%s: %d of %d test messages arrived: the probe may not be allowed to publish to the filters' topics", c.ClientID, c.Received, o.Published)
		}
		return v
	}
	shared := 0
	for _, c := range o.Conns {
		shared += c.Received
	}
	switch {
	case o.Plain.Received < o.Published:
		v.Shared = "untested"
		add(Warn, "shared subscription: not tested: %d of %d test messages arrived on a plain subscription (the probe may not be allowed to publish to the filters' topics)", o.Plain.Received, o.Published)
	case shared == 0:
		v.Shared = "literal"
		add(Fail, "shared subscription: the broker takes $share/GROUP/FILTER as a literal topic filter: none of %d test messages reached the %d shared connections, while a plain subscription got them all; with connections = %d the source ingests nothing: set connections = 1",
			o.Published, len(o.Conns), len(o.Conns))
	case o.SharedDuplicates > 0:
		v.Shared = "not_shared"
		add(Fail, "shared subscription: %d test messages reached more than one shared connection: the broker does not share; with connections = %d each reading would be ingested %d times: set connections = 1",
			o.SharedDuplicates, len(o.Conns), len(o.Conns))
	case shared < o.Published:
		v.Shared = "literal"
		add(Fail, "shared subscription: only %d of %d test messages reached the shared connections: set connections = 1", shared, o.Published)
	default:
		v.Shared = "ok"
		var idle int
		for _, c := range o.Conns {
			if c.Received == 0 {
				idle++
			}
		}
		if idle > 0 {
			add(Warn, "shared subscription: works (each of %d test messages arrived once) but %d of %d connections got none: the broker does not spread the group's messages", o.Published, idle, len(o.Conns))
		} else {
			add(OK, "shared subscription: works: each of %d test messages arrived once, spread over %d connections", o.Published, len(o.Conns))
		}
	}
	return v
}
