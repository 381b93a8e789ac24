// Package sparkplug is the Eclipse Sparkplug B 3.0 protocol: the topic
// namespace, the payload codec, the Sparkplug datatypes, the node's
// sequence numbers, Node, the edge-node session, and Reader, a host's view
// of edge nodes, both pure state machines.
//
// # Topics
//
// spBv1.0/GROUP/TYPE/NODE[/DEVICE], where TYPE is NBIRTH, NDEATH, NDATA,
// NCMD, DBIRTH, DDEATH, DDATA or DCMD; and spBv1.0/STATE/HOST for a host
// application's state. Group, node, device and host ids are non-empty and
// hold none of '/', '+' and '#' (AppendTopic, ParseTopic).
//
// # Payloads
//
// AppendPayload and DecodePayload write and read the protobuf wire format
// of the specification's Payload message directly with package protowire,
// the field numbers taken from the specification, and no generated code:
// generated message types allocate per message and per metric, and the
// encode path runs once per window result. Decoded names, strings and
// bytes alias the input. The
// decoder follows protobuf's rules (unknown fields and fields of an
// unexpected wire type are skipped; the last of a repeated scalar wins);
// it rejects only malformed framing, with an error that says where.
// Templates, data sets, properties and metadata are skipped: a metric
// whose value is one of them decodes with KindUnsupported. The tests hold
// the codec against hand-worked encodings and, in both directions, against
// Cirrus Link's sparkplug-payload, an independent implementation.
//
// # Sequence numbers
//
// seq runs 0–255 over every message of a node's session after NBIRTH (which
// carries 0) and wraps to 0; NDEATH carries none. bdSeq, 0–255 and
// wrapping as well, grows by one with every MQTT CONNECT: NBIRTH and the
// NDEATH registered as that connection's will carry the same value, so a
// host can tell a stale will from the current session's. BdSeqFile keeps
// it in the data directory so a restart does not reuse one.
//
// # The edge node
//
// Node decides what to publish from events (connecting, connected, the
// primary host's STATE, an NCMD, a result for a key, disconnected) and
// holds no socket, clock or goroutine: the caller passes the time and does
// the MQTT I/O. Each key is one Sparkplug device; its DBIRTH precedes its
// first DDATA and carries one metric per aggregate, with an alias that
// its DDATAs use instead of the name; a metric is a Double, or an Int64
// where Config.Types says its field is an integer (a count). DDATA metrics still state their
// datatype: Cirrus Link's decoders read a value by it and drop it without.
// A metric's timestamp is the result's (the caller picks the window's
// start or end); a NaN or infinite aggregate is sent as is_null.
//
// Node does not deliver: a result refused while the births are not out
// (the broker or the primary host away) stays with the caller, to be sent
// after the next births with historical = true. Data messages are QoS 0,
// as the specification requires, so a host detects loss by a gap in seq
// and answers it with an NCMD rebirth.
//
// # The sink
//
// Sink is Node over MQTT: window results in (record.Item), the node's
// messages out through one connection at a time, MQTT 5 (link5, on an
// mqtt5.Session) or MQTT 3.1.1 (paho, one client per connection), so that
// each CONNECT registers the NDEATH of its own bdSeq (NextBdSeq) as its
// will; a broker that refuses 5 gets 3.1.1 for the rest of the run. A
// closing sink publishes the NDEATH itself (a clean DISCONNECT drops the
// will). Results refused while the node is not born, and all after them
// until those are out, are held in a write-ahead log of package wal (the
// WAL sink's segment files, records of this package: store.go), in
// order, bounded in bytes (the oldest dropped, counted), and read back one
// at a time (memory does not grow with them) to be published after the
// next births as historical. The log follows the
// checkpoint's two-phase commit: appended as results come (WriteEpoch),
// synced at the barrier (PreCommit), cut back to the restored checkpoint
// (Recover), so held results survive a crash, held once. Results that
// reach it as JSON only (a bounded input's, released at its end) are read
// back from their JSON. Results are published as they arrive, not after a
// checkpoint: a restore publishes again what the last checkpoint does not
// cover (docs/upstream.md states the guarantee).
//
// # The host's view
//
// Reader reads edge nodes' messages as a host application does: it
// resolves aliases from the births, checks that seq runs on by one over
// every message of a node, refuses what it cannot read with a reason for
// the dead letter (before_birth, seq_gap, unknown_alias, bad_payload,
// not_sparkplug) and, on NDEATH or DDEATH, emits each metric's last value
// marked stale. After a seq gap the node's data is refused until its next
// NBIRTH. An NDEATH whose bdSeq is not the current NBIRTH's is an older
// session's late will and changes nothing. AppendSnapshot and Restore
// carry its state (sessions, aliases, last values) across a restart.
//
// # The source
//
// A source with format sparkplug_b runs a Reader in each of its
// pipelines' prepare stages, after the ingest log, and checkpoints its
// snapshot with the pipeline; AppendReadingJSON writes each reading as
// the JSON object the pipeline's expressions read. Rebirther publishes
// the NCMD rebirth that answers a refused message (request_rebirth), from
// a connection of its own so the source's session is left alone.
package sparkplug
