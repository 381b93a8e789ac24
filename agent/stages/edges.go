package stages

import (
	"sync/atomic"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/io/source"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state"
)

// SourceBatch is what a source runner sends its pipelines, in order: a
// batch of messages, a checkpoint barrier, or the end of input. A batch is
// shared read-only by every pipeline reading the source; the last one done
// with it releases it, which acks its messages.
type SourceBatch struct {
	Msgs    []source.Message
	Barrier *checkpoint.Trigger // a barrier: no messages
	EOI     bool                // end of input: no messages
	// CaughtUp: the source replayed its ingest log to the end; what
	// follows arrives live (no messages). See Pipeline.HoldProcessingTime.
	CaughtUp bool
	refs     atomic.Int32
}

// Share sets how many pipelines will release b: one per pipeline it is
// sent to. Call it before sending b.
func (b *SourceBatch) Share(n int) { b.refs.Store(int32(n)) }

// Release tells that a pipeline is done with b; the last release acks its
// messages. A barrier or an end of input needs none.
func (b *SourceBatch) Release() {
	if b.Barrier != nil || b.EOI || b.CaughtUp {
		return
	}
	if b.refs.Add(-1) == 0 {
		source.AckAll(b.Msgs)
	}
}

// SinkMsg is what a stage (a window subtask, a prepare stage) sends a
// sink: a delivery belonging to an epoch, or the news that the stage passed
// checkpoint barrier Barrier (then Delivery is nil).
type SinkMsg struct {
	Delivery *operators.Delivery
	Epoch    uint64
	Barrier  uint64
}

// Sink is a sink as the stages writing it see it: where to send, the
// limits a result must respect to be sent there, and how to say that a
// producer is done. The sink's owner registered the producers beforehand
// (Pipeline.Connect says how many).
type Sink struct {
	Name string
	// In takes the producers' messages; a send may block while the sink
	// catches up.
	In chan<- SinkMsg
	// MaxPayload: results larger than this many bytes are never sent to
	// the sink but dead-lettered (0: no limit).
	MaxPayload int
	// PacketLimit, if set, reports a result whose MQTT 5 PUBLISH is over
	// the Maximum Packet Size the sink's broker announced: it is
	// dead-lettered like one over MaxPayload.
	PacketLimit func(record.Item) (size, limit int64, over bool)
	// Done is called once per registered producer when it sends no more.
	Done func()
}

// Clock gives the two times the stages need: the device's wall clock, for
// the future-skew check, the rate of log lines and processing time between
// readings (the prepare stage's ticks; a reading's own is its arrival),
// and a monotonic time for durations (idle inputs, alignment timeouts),
// which reads like a timestamp but never jumps with an NTP step.
type Clock interface {
	MonoMs() int64
	WallMs() int64
	// WallSynced reports whether the wall clock is synchronised: until it
	// is, readings are not checked against max_future_skew.
	WallSynced() bool
}

// Checkpoints is the checkpoint driver as the window subtasks report to
// it: acknowledgements and failures of a barrier, and the snapshots it
// writes asynchronously. written, when not nil, receives the snapshot's
// file opened for reads once it is written whole, before the
// acknowledgement; OnMerged registers where the bases merged from a
// task's files go.
type Checkpoints interface {
	Send(checkpoint.Message)
	WriteSnapshot(id uint64, task, pipeline string, snap state.Snapshot, extra map[string][]byte, written func(*checkpoint.Table))
	OnMerged(task string, fn func(*checkpoint.Table))
}
