// Package source reads messages into an Eddy pipeline: from an MQTT broker
// (MQTT 5 on a connection of its own, or MQTT 3.1.1 through paho), from
// Eddy's embedded broker, from a file or standard input, and it
// holds the sensor simulator used by the quickstart and tests.
//
// # Model
//
// A Source's Run sends batches ([]Message, at most MaxBatch) to a channel in
// source order until its input ends (files) or its context is cancelled; the
// receiver owns each batch. Backpressure is the channel: while it is full,
// Run waits, and what arrives meanwhile waits in a queue whose bound depends
// on the source:
//
//   - MQTT QoS 1/2: messages are acknowledged only by Message.Ack, which the
//     agent calls after a message is safely handed over (after its ingest
//     log append). Unacked messages occupy the broker's in-flight window
//     for the client, which therefore bounds the queue; the broker
//     redelivers them after a reconnect (persistent session, stable client
//     id). Delivery is at least once: redeliveries, including repeats of
//     messages whose ack a disconnect swallowed, must be recognized
//     downstream (paho does not deduplicate inbound QoS 2): each Message
//     names its connection and whether the broker resumed the session
//     there (Message.Conn, Message.Resumed), as some brokers re-send
//     without the DUP flag.
//   - MQTT QoS 0: at most once; the queue is capped by MaxPending and
//     overflows are dropped and counted (Stats).
//   - Embedded broker: not a Source here; the agent takes its publishes
//     from the broker's hook straight into the ingest log
//     (broker.SubscribeDeferred), acking each QoS 1/2 publish after the
//     commit; QoS 0 publishes are queued for it without waiting.
//   - Files: read as fast as the channel accepts.
//
// # Broker settings
//
// MQTT 3.1.1's only flow control is the broker's in-flight window per
// client, and acking after a durable append bounds a connection to window ÷
// commit latency (20 in flight ÷ 10 ms fsync = 2000 msgs/s). For mosquitto
// set max_inflight_messages to about 1000 (never 0, unlimited),
// max_queued_messages large, and persistence true.
//
// # MQTT 5
//
// With MQTTOptions.ProtocolVersion 5 (the agent's default on tcp:// and
// ssl:// brokers) the source keeps the session itself (v5.go), framed by
// mochi-mqtt's packets codec through package mqtt5, which it shares with
// the WAL sink; the reading of PUBLISH packets, the acks and the
// keepalive rule are those of the 3.1.1 tcp:// connection (coalesce.go),
// so acking stays after the ingest-log append. The CONNECT announces
// ReceiveMaximum (DefaultReceiveMaximum: about one ingest commit), which
// bounds what the broker has unacknowledged to the source, and a session
// that never expires or expires after SessionExpiry. A broker that refuses
// version 5 in its CONNACK, or closes the CONNECT unanswered and accepts
// 3.1.1, gets 3.1.1 through paho for the rest of the run, said once. A
// DISCONNECT from the broker ends the connection with its reason by name
// (DisconnectError; session_taken_over: another client with this client
// id). Topic aliases from the broker are resolved per connection (at most
// 1,024), and a message keeps its content type and user properties as the
// PUBLISH encoded them (Message.Props, copied into the arena with the
// payload; at most MaxProps bytes of properties, else TooLarge). The
// connection dials directly: no proxy from the environment, which paho's
// 3.1.1 connections honour.
//
// # Keepalive
//
// paho sends the PINGREQs; the connection judges the broker (liveness in
// keepalive.go): alive while any bytes arrive, lost only when a PINGREQ is
// unanswered and nothing at all arrived for the ping timeout. A broker
// starved of CPU answers PINGREQs late while it keeps streaming, and on
// tcp:// the PINGRESP also waits behind the PUBLISH packets read before it.
//
// # Life cycle
//
// Build a source with NewMQTT, NewSharedMQTT or NewFile, call Run once at a
// time (it may be called again after it returns: queued messages are kept),
// and read Stats through the StatsReporter interface of network sources.
package source
