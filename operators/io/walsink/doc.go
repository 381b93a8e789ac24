// Package walsink is Eddy's exactly-once MQTT sink: a write-ahead log (WAL)
// of the results of each checkpoint epoch, published upstream only after
// that checkpoint completes, at QoS 2, by a publish session of its own whose
// every step is in the same WAL (or at QoS 1, for brokers without QoS 2,
// with repeats bounded by the in-flight window: see QoS 1 mode). It is Flink's GenericWriteAheadSink with
// one difference: Flink may re-send a whole batch after a failure between
// sending and committing; this sink sends no message twice.
//
// # Life cycle (the two-phase commit contract)
//
//	s, err := walsink.Open(dir, opts, log)  // replays the WAL, resumes publishing what was committed
//	err = s.Recover(lastCompleted)          // after every Open: what the checkpoint store says
//	for each epoch n (between checkpoints n-1 and n):
//		s.Write(n, msgs)                    // appended, not synced, not published
//		s.PreCommit(n)                      // at barrier n: fsync; part of checkpoint n
//		s.Commit(n)                         // checkpoint n completed: publishable, sent in order
//	s.Close()
//
// Recover(c) makes the pre-committed data of epochs ≤ c publishable (the
// commit record may have been lost in the crash) and discards everything
// written after it for good: replay recomputes it and writes it again as
// epoch c+1 onward. Discarded data is never published, so the outputs of an
// epoch reach the broker once even if the epoch was written several times.
//
// # WAL file format
//
// The WAL is a directory of segment files (package wal): each starts with a
// 12-byte header, the magic "EDDYWSNK" and the format version (u32, 5),
// followed by frames (length, CRC-32C, payload; a torn tail of the last
// segment is cut at Open). A frame's first payload byte is the record kind;
// integers are little-endian.
//
// The format version covers the records below as well as the frames: a
// change to either raises it, and a segment of any other version fails
// Open with wal.ErrVersion, naming the file and both versions, never a
// misread. Until the first tagged release a build reads only the version
// it writes. A flow's packet id is derived from its seq, and its PUBLISH
// step (kind 9, step 1) may be lost in a power cut though the PUBLISH went
// out (see "Why no duplicates").
//
//	kind 1 state      nextSeq u64, lastEpoch u64, committedEpoch u64,
//	                  committedSeq u64, nextAssign u64,
//	                  n u32 × (epoch u64, seq u64)        pre-commits not yet committed
//	                  n u32 × (from u64, to u64)          aborted seq ranges still ahead
//	                  n u32 × (seq u64, unixNano u64)     commit times of the backlog
//	                  n u32 × (seq u64, id u16, step u8)  open publish flows
//	kind 2            unused
//	kind 3 pre-commit epoch u64, seq u64: data ≤ seq of epochs ≤ epoch is synced
//	kind 4 commit     epoch u64, seq u64, unixNano u64: data ≤ seq is publishable
//	kind 5 abort      lastCompleted u64, from u64, to u64: seqs from..to are
//	                  discarded (written by Recover)
//	kind 6            unused
//	kind 7 drop       from u64, to u64, count u64, bytes u64: drop_oldest
//	                  skipped these committed, never-sent seqs
//	kind 8 resume     from u64: QoS 1 mode: every seq below from is
//	                  PUBACKed (or dropped or aborted) and publishing
//	                  resumes there; open QoS 2 flows are abandoned
//	kind 9 steps      runs to the end of the frame, each: step u8, seq
//	                  uvarint, n-1 uvarint, and for step 1 id u16: the flow
//	                  steps of seqs seq..seq+n-1 (ids id, id+1, …, 65535
//	                  wrapping to 1: qos2.IDOf of the seqs); steps 1
//	                  PUBLISH sent, 2 PUBREC received and 3 PUBCOMP
//	                  received; steps 2 and 3 take the id of the seq's
//	                  open flow. A batch of steps, in order, one frame and
//	                  one fsync per batch: a window's PUBRECs, which come in
//	                  seq order, are one run of a few bytes
//	kind 10 data      epoch uvarint, seq uvarint, flags u8 (1 = retain),
//	                  topicLen uvarint, topic, payload (the rest): 14
//	                  bytes of overhead a message with the frame's 8
//
// Every message gets a sequence number (seq) when written; seqs increase
// through the log, epochs never decrease along them, and a message is
// published in seq order. Every segment starts with a state record, and a
// state record is written (and synced) before segments are deleted, so
// replaying the remaining segments in order — state records set, the
// others apply — rebuilds the same state. A segment other than the active
// one is deleted once every message in it is PUBCOMP'd, dropped or aborted
// (message data is never deleted while a flow or the publisher still needs
// it; a session record always follows its message's data in the log).
//
// # Why no duplicates
//
// MQTT 3.1.1 QoS 2 delivers exactly once between a client and a broker that
// both keep their session state for the flow. mosquitto keeps its side
// (persistence on, clean session 0, a fixed client id) and delivers an
// incoming QoS 2 message to subscribers when the PUBREL arrives, after which
// it forgets the packet id. The sink keeps its side in the WAL (package
// qos2 gives the order; one fsync per batch of steps):
//
//  1. A message's packet id is derived from its seq (qos2.IDOf: seq 1 to
//     65535 get ids 1 to 65535, and around), so "PUBLISH sent" is written
//     but not synced before the PUBLISH leaves. After a reconnect, or a
//     crash that kept the record, the flow re-sends PUBLISH with DUP=1 and
//     the same id; after a power cut that lost it, the publisher resumes at
//     the first seq without a flow record and sends the message again,
//     under the same id. Either way a broker that already has that id
//     answers PUBREC without a second delivery: the message was not
//     released (no PUBREL was sent, since that needs step 2's record, which
//     follows this one in the log), so the broker still has the id.
//  2. "PUBREC received" is durable before the PUBREL leaves. Once a PUBREL
//     may have left (in this process, or in an earlier one: a restored
//     flow at this step), the flow only ever re-sends PUBREL, never the
//     PUBLISH: the broker may have delivered the message and forgotten
//     the id, and a PUBLISH would be a new message — the duplicate
//     paho.mqtt.golang produces after a restart (its issue 788), because it
//     never persists PUBREL. A PUBREL for a forgotten id is answered with
//     PUBCOMP and delivers nothing. Until then the flow is as at step 1:
//     after a close it is published again, DUP, same id (a PUBREC just
//     before a close may be for a message the broker dropped; see Broker
//     settings), with a step 1 record after its step 2 one.
//  3. An id is reused (every 65535 seqs) only after its PUBCOMP, and the
//     reusing flow's PUBLISH leaves only once that PUBCOMP record is
//     durable, so a power cut can never resume the old flow at PUBREL while
//     the broker holds the new one's message under the same id. A PUBREC
//     for an id without an open flow gets no PUBREL, for the same reason.
//  4. Only committed epochs are published, and Recover discards what was
//     written after the last completed checkpoint before replay writes it
//     again, so a recomputed output is never a second message.
//
// Hence: a crash of the sink, a reconnect, or a broker restarted with SIGTERM
// (which saves its sessions) produce neither duplicates nor losses.
//
// # Caveats
//
//   - A broker that loses its own QoS 2 state (mosquitto SIGKILLed, or
//     persistence off; CONNACK says session present = 0) cannot be made up
//     for by any client: flows it had received may be lost or, re-sent,
//     delivered twice. The sink logs it. A broker that delivers a QoS 2
//     message on receipt and keeps sessions in memory (aedes, the embedded
//     broker) loses none and delivers at most the flows open at its
//     restart twice (e2e TestCrash_WALSinkExactlyOnce/aedes, /embedded).
//   - mosquitto 2.0.11, restarted with SIGTERM while it drains a backlog to a
//     subscriber, may itself re-send QoS 2 messages it had already delivered
//     to that subscriber (DUP=1, same packet id and payload). These repeats
//     are broker-side, between broker and subscriber; the sink sent the
//     message once. A consumer (and the tests' collector) must ignore DUP
//     repeats of a payload it already has, or deduplicate by the output id.
//   - A device restored from S3 on new hardware starts from the last uploaded
//     checkpoint, without this WAL: outputs of epochs after it are published
//     again; their deterministic ids let consumers drop them.
//   - The sink's side is durable (fsync). The broker's side is mosquitto's
//     persistence: with autosave_interval it writes its database
//     periodically and at SIGTERM, so power loss of the broker's host can
//     still lose its state.
//   - Order: messages are published in seq order and mosquitto delivers in
//     PUBREL order, which is PUBREC order, which is PUBLISH order. After its
//     own restart, mosquitto 2.0.11 may send a subscriber the messages of
//     its restored in-flight window (at most its max_inflight_messages)
//     behind newer ones, with or without DUP: order across a broker restart
//     holds only up to that window.
//
// # QoS 1 mode
//
// With Options.QoS = 1 (brokers without QoS 2) committed messages are
// published at QoS 1 from the WAL, in seq order, at most MaxInflight
// unacknowledged (qos1Window, in memory). After each batch of PUBACKs the
// position below which everything is acknowledged goes into the WAL (kind
// 8, not synced: a process crash keeps it in the page cache, power loss may
// lose the last ones and widen the repeats to them). A reconnect re-sends
// the window (DUP=1); a restart resumes at the recorded position. The
// guarantee: no loss, order per key, repeats only of the unacknowledged
// in-flight window, each a byte-identical message and so with the same id.
// Open flows of a QoS 2 run are abandoned when the WAL is opened at QoS 1
// and their messages, from the oldest, published again at QoS 1.
//
// # Immediate mode (at least once)
//
// With Options.Immediate every Write is committed in the same write as its
// data, so it is published at once; PreCommit only syncs. It is the disk
// buffer of the at-least-once sink: an outage fills the WAL (MaxDiskBytes,
// WhenFull) instead of failing writes.
//
// # Offline store-and-forward
//
// While the broker is unreachable the publisher reconnects with exponential
// backoff (ReconnectMin..ReconnectMax) and the WAL grows. When it would pass
// MaxDiskBytes while committed messages wait for delivery, WhenFull decides:
// Block makes Write wait until delivery frees segments or leaves no
// committed message undelivered (backpressure: the pipeline stops, the
// ingest log absorbs, then sensors' messages stay unacked at their broker),
// or the caller's context ends, or Close; Commit still runs meanwhile.
// DropOldest drops the oldest committed messages never sent, one segment's
// worth at a time, records the drop durably, counts it exactly
// (Stats.Dropped) and logs it. Open flows are never dropped: their ids are
// live at the broker. With no committed message left to deliver, a Write is
// accepted past MaxDiskBytes: only the commit of pending epochs could make
// room, and their checkpoint has to pass the sink first. This relies on the
// backlog count being exact, which is why an epoch's data is never split by
// a pre-commit mark (see PreCommit). Publishing, steady or draining the
// backlog after a reconnect, goes in order at most DrainRate messages per
// second.
//
// # Broker settings
//
// MaxInflight (default 20, mosquitto's default) is the most QoS 2 flows
// open at once; the window actually used is learnt from the broker and may
// be smaller (window.go): mosquitto answers a QoS 2 PUBLISH over its
// per-client limit with PUBREC, drops the message and keeps the connection,
// which a 3.1.1 client cannot see, so the publisher asks the broker for its
// MQTT 5 Receive Maximum once per Open, on a connection of its own
// (probe.go: client id ClientID+"-limits", clean start), and never exceeds
// it. A broker that announces no limit and closes the connection instead
// halves the window (at a close with more than one flow open); it grows
// back by one per 1,000 clean completions. A close before any answer sets
// the window to one flow, announced limit or not (only a window of one
// tells a refusal of QoS 2 from a limit); an answer then restores an
// announced limit. A flow whose PUBREC came but whose PUBREL never left
// is published again after such a close (DUP, same id; package qos2): a
// PUBREC just before a close is no proof the broker kept the message.
// Stats.Window is the window in use. QoS 2 is named refused only when a
// window of one flow fails too.
//
// A broker that answers a QoS 2 PUBLISH with PUBACK (RabbitMQ's MQTT
// plugin) has downgraded it to QoS 1: the flow ends there (the broker has
// the message, once), no new flow starts, and Stats.Refusal says to set
// QoS 1, until Close.
//
// With 20 in flight the rate is about 20 ÷ round trip (and an fsync per
// window of 20); for throughput raise both, e.g. for mosquitto:
//
//	persistence           true
//	max_inflight_messages 1000   # ≥ MaxInflight
//	max_queued_messages   1000000
//
// Open flows restored from a run with a larger MaxInflight resume
// MaxInflight (or the window) at a time.
//
// # MQTT 5
//
// Options.ProtocolVersion 5, the default, speaks MQTT 5 (v5.go; the
// connection is an mqtt5.Session, which reads the answers and writes what
// the publisher sends; mochi's packets codec frames the packets; the
// session logic, keepalive included, stays in package qos2 and the
// publisher). The CONNECT asks for a session that never expires
// (clean start 0, Session Expiry Interval 0xFFFFFFFF: what 3.1.1's clean
// session 0 is). A broker that refuses the version in its CONNACK (a 3.1.1
// broker's return code 1, or 0x84) gets MQTT 3.1.1 for the rest of the run,
// said once; one that closes the MQTT 5 CONNECT unanswered (RabbitMQ's
// MQTT plugin) is tried in 3.1.1 at once, kept for the run if it accepts. What an MQTT 5 CONNACK announces is honoured on every
// connection, with no probe: Receive Maximum caps the window (and QoS 1's
// window), said once at Info; a Maximum QoS below Options.QoS is a refusal
// named at connect, before any publish (the connection is closed and tried
// again with backoff); a committed message whose PUBLISH would exceed the
// Maximum Packet Size is dead-lettered too_large: never published, logged,
// counted (Stats.TooLarge) and taken out of the backlog with a drop record
// (at QoS 2 written only after the records of the flows started before it,
// so a crash cannot skip those). Every answer's reason code is counted by
// name (Stats.Reasons, Options.OnReason); 0x10 "no matching subscribers" is
// success. A PUBACK or PUBREC of 0x80 or above (not authorized, quota
// exceeded, …) is a refusal named by the reason's name; the connection is
// dropped so the flow is published again after the backoff, never lost
// (the broker forgets a refused id, so the same id is a new message). A
// DISCONNECT from the broker ends the connection with its reason's name.
// Each PUBLISH carries the result's id (the payload's first member) as the
// user property "id" and the content type application/json. The 3.1.1
// guesses (window halving at closes, ErrQoS2Refused from closes) apply to
// 3.1.1 connections only.
//
// # A broker that refuses
//
// Stats.Refusal names a broker that refuses the session, and the publisher
// logs it once at Error: a CONNACK return code, with its meaning, or a
// broker that closes two connections in a row within seconds of their first
// QoS 2 PUBLISH without a PUBREC or PUBCOMP while the window is one flow
// (ErrQoS2Refused: MQTT 3.1.1 gives a client no other sign that a QoS is
// refused; closes with more flows open lower the window first, since they
// may be a limit), or a broker that downgrades QoS 2 (a PUBACK). The
// publisher keeps retrying; the refusal ends with an accepted CONNACK, or
// a PUBREC or PUBCOMP, respectively; a downgrade lasts until Close.
//
// # Keepalive
//
// The publisher sends a PINGREQ after Options.KeepAlive without sending,
// and judges the connection by everything the broker sends, as Eddy's MQTT
// source does: any bytes (a PUBREC, PUBCOMP, PUBACK or PINGRESP, or part of
// one) prove it alive, and it is dropped only when a PINGREQ is unanswered
// and nothing at all has arrived for KeepAlive since the later of the
// PINGREQ and the last bytes (qos2.Session.Tick); at QoS 1 as at QoS 2. A
// broker starved of CPU answers a PINGREQ only after the PUBLISHes and
// PUBRELs queued before it, while its answers to those keep coming: judged
// by the PINGRESP alone, such a connection was dropped and the window
// published again into the same load, a reconnect loop. A broker that
// goes silent is dropped within 2.5 × KeepAlive of the later of the last
// packet sent and the last bytes received (the PINGREQ and the judgement a
// keepalive each, at ticks of KeepAlive/4), and the publisher reconnects.
// The reader stamps bytes as it reads them, on the monotonic clock, so
// answers still waiting for the publisher (behind an fsync) count, and a
// step of the wall clock changes nothing.
//
// # Costs
//
// Write encodes into a reused buffer and does not allocate. Publishing costs
// an fsync per batch of flow steps, a few allocations per message inside
// the packets codec (paho's at 3.1.1, mochi's at MQTT 5, which also
// allocates each answer it reads), and one read of each message back from
// the WAL.
// Open reads the backlog once. Group commit makes the batches large: while
// the broker's answers to packets already sent are on their way, the
// publisher holds the records it has (at most 20 ms) and writes and syncs
// them together with those answers' records, so a window's flows share
// each fsync. A flow needs one (PUBREC received, before its PUBREL; its
// PUBLISH step needs none, since the id is derived): with 20 in flight, one
// fsync per about 20 results; with a window as large as a checkpoint's
// results, a few per checkpoint. Each fsync writes the partly filled last
// page again, and at a small window that is most of what is written for a
// small result (BENCHMARKS.md, WAL sink write amplification).
package walsink
