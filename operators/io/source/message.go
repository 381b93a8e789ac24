package source

import "context"

// Message is one message received by a source. Payload and Topic are owned by
// the receiver once delivered: the source never touches them again.
type Message struct {
	Topic   string
	Payload []byte
	// Arrival is the wall-clock time the message was received, in
	// milliseconds since the Unix epoch.
	Arrival int64
	// Offset is the message's position in the source: the 1-based line
	// number for files, a per-source sequence (1, 2, ... from Run's
	// construction, across reconnects) for MQTT and the embedded broker. It
	// is not stable across restarts for MQTT; the ingest log's offset is.
	Offset uint64
	// Dup is the MQTT DUP flag: the broker says it may have delivered this
	// message before (a redelivery after a reconnect). The ingest log's
	// dedup checks such messages against what it already holds.
	Dup bool
	// ResumeStart, on a message read back from the ingest log, marks the
	// first message of a connection on which the broker resumed the
	// session (ingest.FlagResumed): the broker's stored messages follow it,
	// possibly behind newer ones.
	ResumeStart bool
	// TooLarge: the message exceeded the source's maximum message size;
	// Payload holds its first TooLargeKeep bytes only. It is acknowledged
	// like any other, and the pipeline dead-letters it (reason too_large).
	TooLarge bool
	// Conn is the connection the message came on (MQTT sources; zero
	// elsewhere): which broker session and which of its connections.
	Conn ConnID
	// Resumed: the broker resumed the session on that connection (CONNACK
	// session present), so it may re-send, with or without DUP, what it had
	// sent on the session's previous connection and not seen acknowledged.
	Resumed bool
	// Props are the properties of an MQTT 5 PUBLISH that a pipeline can
	// read (meta.content_type, meta.user_properties.NAME): the content type
	// and user properties, encoded as in the packet (package mqtt5 walks
	// them); nil when it had none, and for every other source.
	Props []byte
	ack   func() // nil when the source needs no ack
	// conn, when set, is the connection to write the ack to (the MQTT
	// source's tcp:// connections): PUBACK, or PUBREC when ackPubrec, for
	// packet id ackID.
	conn      *coalescingConn
	ackID     uint16
	ackPubrec bool
}

// Ack acknowledges the message to the broker (the PUBACK of QoS 1, the PUBREC
// of QoS 2, sent only now because the MQTT source disables paho's automatic
// acks). It is a no-op for QoS 0, files and the embedded broker (which acks
// when its hook returns). Call it once, after the message is safely handed
// over, and in delivery order: MQTT 3.1.1 asks a client to acknowledge QoS 1
// messages in the order received. Further calls do nothing.
//
// Acks of messages received on a connection that has since been lost are
// dropped (an ack is bound to its connection): the broker redelivers those
// messages on the new connection, and the redelivered copies must be acked
// too, even when the receiver recognizes them as duplicates.
func (m *Message) Ack() {
	if m.conn != nil {
		m.conn.writeAck(m)
		return
	}
	if f := m.ack; f != nil {
		m.ack = nil
		f()
	}
}

// AckAll acks msgs in order, as calling Ack on each would, but the acks of
// consecutive messages from one MQTT connection leave together: one append
// to its write buffer and one wake-up of its writer per run.
func AckAll(msgs []Message) {
	for i := 0; i < len(msgs); {
		if c := msgs[i].conn; c != nil {
			i += c.writeAcks(msgs[i:])
			continue
		}
		msgs[i].Ack()
		i++
	}
}

// ConnID identifies a connection of a source. The zero ConnID is none (not
// an MQTT source).
type ConnID struct {
	// Session is the broker session: 0 for an MQTT source, i for
	// connection i of a SharedMQTT source (each its own client id).
	Session uint16
	// Seq numbers the session's connection attempts from 1 in this
	// process: it grows with every (re)connect.
	Seq uint32
}

// Source produces messages in batches until input ends or ctx is cancelled.
type Source interface {
	// Run sends batches of messages to out, in source order. It returns nil
	// at end of input (files) or when ctx is cancelled, and an error when it
	// cannot go on (e.g. file not found). It never closes out. The receiver
	// owns each batch slice. Run must not be called concurrently with itself.
	Run(ctx context.Context, out chan<- []Message) error
}

// MaxBatch is the most messages a source puts in one batch.
const MaxBatch = 512
