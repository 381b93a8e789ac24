// Package broker runs Eddy's embedded MQTT broker: a mochi-mqtt server on a
// TCP listener for sensors that have no broker of their own, and a second,
// internal one on 127.0.0.1 for the agent's own clients (Broker.Internal:
// its MQTT sinks and simulators), which need neither the sensors' TLS client
// certificates nor their credentials.
//
// # Model
//
// Sensors publish to the broker as to any MQTT 3.1.1 or 5 broker. Eddy reads
// what they publish through Subscribe, not through an MQTT subscription: the
// subscriber function runs synchronously in the broker's publish hook, which
// mochi calls BEFORE it acknowledges the publish to the sensor (PUBACK for
// QoS 1, PUBREC for QoS 2). So when the sensor holds an acknowledgement, every
// subscriber function has returned nil for that message; a durable ingest log
// placed in the subscriber makes the acknowledgement mean "on disk".
//
// SubscribeDeferred is the same contract for a subscriber that completes
// later (a group commit): a QoS 1 publish that only it matches is taken out
// of the connection's read loop until its Completion is done, then handed
// back to mochi (InjectPacket), which acknowledges and routes it. So one
// sensor can have many publishes waiting for the same commit — up to its
// own in-flight window — where a blocking subscriber would see them one at
// a time. A QoS 0 publish that only it matches is queued without waiting:
// nothing acknowledges it, so waiting would only hold the sensor to one
// message per commit. Re-injected publishes count twice in mochi's $SYS statistics.
//
// # Life cycle
//
// Start binds the listener and serves; Subscribe may be called at any time;
// Close disconnects every client and stops the listener.
//
// # Caveats
//
//   - A subscriber function that returns an error rejects the publish: a QoS 0
//     message is dropped, and for QoS 1 and 2 the sensor's connection is closed
//     without an acknowledgement, so the sensor re-sends the message when it
//     reconnects (MQTT requires it for an unacknowledged QoS 1/2 publish in a
//     persistent session). Other subscribers that matched may then see the
//     message twice; a sensor's own re-send after a lost PUBACK is a duplicate
//     as well. Subscribers must tolerate duplicates.
//   - The hook runs in the sensor connection's read goroutine: a subscriber
//     that blocks stalls that sensor (and only it), which is backpressure; one
//     that blocks longer than the sensor's keepalive gets the sensor
//     disconnected.
//   - A message matching no subscriber is handled as any broker does: it goes
//     to MQTT subscribers, if any, and is acknowledged either way.
//   - A publish whose payload exceeds Options.MaxMessageSize is refused
//     before any subscriber sees it and its client disconnected (MQTT 5:
//     DISCONNECT 0x95); a packet beyond the packet limit (that size plus the
//     largest topic) is cut off by mochi from its fixed header, unread, and
//     counted alike (Broker.TooLarge, the hook logs the client). Other
//     clients are not affected.
//   - With ACLs a client publishes and subscribes only within its ACL;
//     $SYS is closed to clients unless an ACL names it. Refusals are
//     counted by reason (Broker.Refused) and logged one bounded line each,
//     rate limited; mochi's own log is filtered so that no packet, and so
//     no payload, reaches it (see mochiHandler).
//   - A listener beyond loopback needs a username and password, or TLS that
//     requires and verifies client certificates; Start refuses otherwise.
//     TLS without client certificates encrypts but lets anyone in.
package broker
