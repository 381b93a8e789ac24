// Package qos2 is the WAL sink's MQTT 3.1.1 QoS 2 publish session as a pure
// state machine, shaped like raft's RawNode: no sockets, files, goroutines
// or clocks inside. The driver feeds it messages to publish (Publish), the
// broker's packets (Step), connection changes (Connected, Disconnected) and
// the time (Tick), and takes its work out as a Ready:
//
//	for {
//		... s.Publish / s.Step / s.Tick ...
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
// Records of a Ready must be durable before any of its Packets is sent. This
// is what makes the session resumable without duplicates:
//
//   - StepPublishSent (message seq got packet id) is durable before the
//     PUBLISH leaves, so after a crash the message is re-sent with the SAME
//     id and DUP=1, which the broker recognises; a fresh id would make it a
//     new message.
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
//     An id is reused only after its PUBCOMP, and the reusing flow's record
//     comes after the PUBCOMP record in the log, so replaying the log in
//     order never confuses the two flows.
//
// Records for a whole batch of flows go into one Ready: one write and one
// fsync per batch of steps, never per message.
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
// At most Config.MaxInflight flows are open; CanPublish says whether another
// may start. Restored flows beyond it (a limit lowered between runs) are
// resumed as earlier flows finish, never all at once. Tick sends PINGREQ when nothing was sent for KeepAlive and asks
// the driver to drop the connection (Ready.Disconnect) when a PINGRESP is
// more than KeepAlive late.
package qos2
