// Package qos2 is the WAL sink's MQTT 3.1.1 QoS 2 publish session as a pure
// state machine, shaped like raft's RawNode: no sockets, files, goroutines
// or clocks inside. The driver feeds it messages to publish (Publish), the
// broker's packets (Step) and when its bytes arrived (Received), connection
// changes (Connected, Disconnected) and the time (Tick), and takes its work
// out as a Ready:
//
//	for {
//		... s.Publish / s.Step / s.Received / s.Tick ...
//		if s.HasReady() {
//			rd := s.Ready()
//			persist rd.Records in ONE write; fsync if rd.MustSync
//			send rd.Packets, in order
//			s.Advance()
//		}
//	}
//
// # The ordering contract
//
// Records of a Ready must be durable before any of its Packets is sent when
// MustSync is set, and written (in order, in the same log) before them in
// any case. This is what makes the session resumable without duplicates:
//
//   - A flow's packet id is its message's: IDOf(seq). So StepPublishSent
//     needs no sync before the PUBLISH leaves: if the record is lost (power
//     cut), the log still holds the message, and the publisher, resuming at
//     the first seq without a flow record, sends it again under the same
//     id, which the broker recognises (MQTT 3.1.1 §4.3.3: until the PUBREL
//     it answers a PUBLISH with that id with PUBREC, delivering nothing).
//     With an id chosen freely, the re-send would take a new id and be a
//     new message. The record is still written (a process crash keeps it)
//     and synced by the next fsync.
//   - StepPubrecReceived is durable before the PUBREL leaves. Once a PUBREL
//     may have reached the broker, the broker may have delivered the message
//     and forgotten the id; re-sending the PUBLISH then would be a new
//     message (paho's issue 788). With the record, a resumed flow only ever
//     gets PUBREL again. "PUBREL sent" is therefore not a separate durable
//     step: recovery treats "PUBREC received" and "PUBREL sent" alike, and a
//     second record would cost a second fsync per flow.
//   - StepPubcompReceived ends the flow and frees the id. It guards no
//     packet (MustSync stays false for it alone): if it is lost, the flow
//     resumes at PUBREL and the broker answers the unknown id with PUBCOMP.
//   - Ids are reused, every 65535 seqs. A flow starts only when no open
//     flow holds its id (CanPublishSeq), and its PUBLISH leaves only after
//     the PUBCOMP record of the id's previous flow is durable (that Ready
//     has MustSync): otherwise a power cut could resume the old flow at
//     PUBREL and release the new flow's message under the shared id before
//     the new flow is re-sent. Replaying the log in order never confuses
//     two flows of one id: the later one's records follow the earlier one's
//     PUBCOMP.
//   - A PUBREC for an id without an open flow gets no PUBREL: its message
//     may be one the publisher is about to re-send under that id.
//
// Records for a whole batch of flows go into one Ready: one write and at
// most one fsync per batch of steps, never per message. With W flows in
// flight, that is one fsync per W flows (their PUBRECs), where a synced
// PUBLISH step would cost two.
//
// # Resuming
//
// Restore loads the flows the log recorded. Connected queues, in the order
// the flows were first published, PUBLISH with DUP=1 and the original id for
// flows at StepPublishSent, and PUBREL for flows at StepPubrecReceived, as
// MQTT 3.1.1 §4.4 requires of a client resuming a session. The same happens
// on every reconnect, since the broker keeps the session (clean session 0).
//
// # Flow control and keepalive
//
// At most Window flows are open (Config.MaxInflight until SetWindow lowers
// it: the driver learns the broker's limit); CanPublish says whether
// another may start. Restored flows beyond it (a limit lowered between
// runs, or the window since) are resumed as earlier flows finish, never
// all at once.
//
// A PUBREC is not proof the broker kept the message (mosquitto answers one
// for a PUBLISH over its in-flight limit and drops it). So a flow whose
// PUBLISH was answered but whose PUBREL never left (no Ready holding it
// was advanced, in this process) goes back to StepPublishSent at
// Disconnected and is published again (DUP, same id) on the next
// connection: a broker that kept the id delivers nothing twice, one that
// dropped it takes it. A PUBACK (a broker that downgrades QoS 2 to 1) ends
// a flow at StepPublishSent like a PUBCOMP.
//
// Tick sends PINGREQ when nothing was sent for KeepAlive. Any bytes from
// the broker prove the connection alive (the driver reports them with
// Received): Tick asks the driver to drop the connection (Ready.Disconnect)
// only when a PINGREQ is unanswered and nothing at all has arrived for
// KeepAlive since the later of the PINGREQ and the last bytes — the rule
// of Eddy's MQTT source. A PINGRESP merely late, with PUBRECs, PUBCOMPs or
// PUBACKs arriving meanwhile, is a broker starved of CPU working through
// the packets ahead of the PINGREQ, not a dead one; dropping it would
// re-send the window into the same load, over and over.
package qos2
