// Package probe commissions a device's MQTT brokers before production
// (`eddy probe`): MQTT 3.1.1 announces no limits, and several brokers
// break the agent's assumptions without a word on the wire. It measures
// what a broker takes and decides which settings fit it.
//
// The decision is pure (DecideUpstream, DecideSource, NextWindow): given
// the observations, the same verdict. The I/O is at the edges:
// ProbeUpstream and ProbeSource connect, publish and count.
//
// # Upstream (a sink "mqtt")
//
// The probe connects as the sink does (URL, TLS, credentials) under the
// sink's client id with "-probe" appended (a raw MQTT 3.1.1 connection
// written with paho's packets codec, so it sees PUBACK versus PUBREC and a
// close) and "-probe-sub" (a paho subscriber), both with a clean session:
// the sink's own session at the broker is not touched and nothing is left
// behind. Test messages go to a scratch topic, eddy-probe/DEVICE/RANDOM,
// never retained; QoS 2 flows run through the exactly-once sink's own
// session state machine (operators/io/walsink/qos2).
//
//   - In-flight window, at QoS 1 and at QoS 2: bursts of 1, 2, 5, 10, 20,
//     50, … messages written back to back (up to the larger of max_inflight
//     and 1000), then a bisection between the largest burst that arrived
//     whole and the smallest that did not. A burst passes when every
//     message arrives at the subscriber exactly once and the connection
//     stays up; mosquitto acknowledges and drops the messages beyond its
//     limit, which only the subscriber sees.
//   - QoS 2: PUBREC is "ok", PUBACK "downgraded" (RabbitMQ), a close
//     without an answer on two connections in a row "refused".
//   - Payload size: one QoS 1 message of 1 KiB, 4 KiB, … up to max_payload
//     or 1 MiB, until one is refused (closed) or lost (acknowledged but not
//     delivered).
//   - The sink's topic: one QoS 1 message (JSON with an "eddy_probe"
//     field, not retained) to the sink's topic rendered with the first
//     pipeline writing to it, key "eddy-probe" and the current minute,
//     while the subscriber listens there: a close is a refusal, a PUBACK
//     without delivery a broker that drops it (mosquitto's ACL). Consumers
//     of that topic see this one message.
//
// # Upstream (a sink "sparkplug")
//
// ProbeSparkplug connects as the node does (MQTT 3.1.1, client id with
// "-probe", clean session, no will), publishes nothing, subscribes to the
// node's NCMD and the primary host's STATE, reads the host's retained
// STATE, and asks what the broker announces on an MQTT 5 connection
// (walsink.ProbeAnnounced). DecideSparkplug judges it.
//
// # Sources (a source "mqtt")
//
// With connections = N > 1, N connections subscribe as the source's do but
// in the group "<group>-probe" (so a running agent's group keeps all its
// messages), with client ids "<client_id>-probe-I" and clean sessions,
// plus one plain subscription; 2N test messages are published to topics
// the filters match ('+' and '#' levels become "eddy-probe"). Each should
// reach one shared connection and the plain one. A broker that takes
// $share/... literally (RabbitMQ 3.10) delivers to the plain one only. The
// granted QoS per filter comes from the SUBACKs. A running agent's
// persistent session on those filters receives the test messages too.
package probe
