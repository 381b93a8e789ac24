// Package stream is the transport between a pipeline's stages: batches of
// records, watermarks and control messages on bounded channels.
//
// Channels carry batches, never single readings: a channel operation costs
// about as much as processing a reading, so per-reading sends would cap
// throughput. A watermark or barrier closes the batch before it, so the order
// of records, watermarks and barriers on one channel is the order they were
// produced in. Backpressure is a full channel: a producer blocks until the
// consumer takes the next message. Control that must overtake queued data
// (cancellation, later unaligned barriers) goes on an Edge's priority channel,
// which the consumer checks first.
package stream

import (
	"context"
	"sync"
)

// Kind says what a Message carries. The zero Kind is invalid.
type Kind uint8

const (
	_          Kind = iota
	Records         // Batch holds records
	Watermark       // Watermark holds the sender's new watermark
	EndOfInput      // the sender will send nothing more; all windows may flush
	Barrier         // checkpoint barrier Barrier.ID: snapshot, then forward
	// ProcessingTime holds the sender's new processing time: every reading
	// arrived before it was sent ahead of it.
	ProcessingTime
)

// BarrierInfo describes a checkpoint barrier.
type BarrierInfo struct {
	ID uint64
	// Full asks for a full snapshot; otherwise an incremental one relative to
	// the snapshot taken for checkpoint Parent (full if the task has none).
	Full   bool
	Parent uint64
	// Control is the pipeline's control state at the barrier (its JSON
	// snapshot), carried to subtask 0, which puts it in the checkpoint.
	Control []byte
	// Resume is the prepare stage's state after a resumed MQTT session
	// (a watermark hold), carried to subtask 0, which puts it in the
	// checkpoint; nil when there is none.
	Resume []byte
	// Sparkplug is the prepare stage's Sparkplug reader state
	// (sessions, aliases, last values) at the barrier, carried to
	// subtask 0, which puts it in the checkpoint; nil for other formats.
	Sparkplug []byte
	// MaxTime is the newest event time the prepare stage routed before
	// the barrier, carried to subtask 0, which puts it in the checkpoint.
	MaxTime int64
	// Announcement marks the copy of a barrier sent ahead on the priority
	// channel (unaligned checkpoints): the barrier itself follows in-band.
	Announcement bool
}

// Message is one item on an Edge.
type Message struct {
	Kind      Kind
	Batch     *Batch
	Watermark int64
	// ProcessingTime is the sender's processing time (Kind
	// ProcessingTime): wall-clock ms, as Batch.Arrivals.
	ProcessingTime int64
	Barrier        BarrierInfo
}

// Batch holds records in columnar form, ready for a keyed window subtask.
// Record i has key Keys[KeyEnds[i-1]:KeyEnds[i]], aggregate arguments
// Values[i*Stride:(i+1)*Stride] (NaN = null) and, for the late-data side
// output, its original payload.
//
// A Batch is owned by whoever holds it; the receiver returns it with Release
// once done so its buffers are reused.
type Batch struct {
	Keys        []byte
	KeyEnds     []int
	KeyGroups   []uint16
	Times       []int64
	Values      []float64
	Stride      int
	Payloads    []byte
	PayloadEnds []int
	Offsets     []uint64
	// Watermarks holds, per record, the watermark in effect just before the
	// record was read (the generator's value before it saw the record's
	// timestamp). A subtask advances its operator to it before processing
	// the record, so lateness decisions do not depend on where batch
	// boundaries fall: a replay gives the same result however it is batched.
	// Nil (empty) on processing time.
	Watermarks []int64
	// Records [ResumedFrom, ResumedTo) arrived just after the broker
	// resumed the source's session (watermark.Resume.InEpisode): dropped
	// as late, they are counted as its stored backlog. 0, 0: none.
	ResumedFrom, ResumedTo int
	// Arrivals holds, per record, its processing time: the wall-clock ms
	// its source received it, as the ingest log recorded it, so a replay
	// of the log after a restore sees the times of the first run. Empty
	// in a pipeline without processing-time timers.
	Arrivals []int64
	// Controls holds, per record, the control values captured for it in
	// the prepare stage (expr.ControlPaths), for a keyed pipeline that
	// reads control.*; empty otherwise (ControlEnds nil).
	Controls    []byte
	ControlEnds []int
}

var batchPool = sync.Pool{New: func() any { return new(Batch) }}

// NewBatch returns an empty batch for records with stride aggregate values.
func NewBatch(stride int) *Batch {
	b := batchPool.Get().(*Batch)
	b.Stride = stride
	return b
}

// Release empties b and returns it for reuse. b must not be used afterwards.
func (b *Batch) Release() {
	b.Keys = b.Keys[:0]
	b.KeyEnds = b.KeyEnds[:0]
	b.KeyGroups = b.KeyGroups[:0]
	b.Times = b.Times[:0]
	b.Values = b.Values[:0]
	b.Payloads = b.Payloads[:0]
	b.PayloadEnds = b.PayloadEnds[:0]
	b.Offsets = b.Offsets[:0]
	b.Watermarks = b.Watermarks[:0]
	b.Arrivals = b.Arrivals[:0]
	b.ResumedFrom, b.ResumedTo = 0, 0
	b.Controls = b.Controls[:0]
	b.ControlEnds = b.ControlEnds[:0]
	batchPool.Put(b)
}

// Len is the number of records.
func (b *Batch) Len() int { return len(b.Times) }

// Append adds one record. values must have length Stride.
func (b *Batch) Append(key []byte, keyGroup uint16, t int64, values []float64, payload []byte, offset uint64) {
	b.Keys = append(b.Keys, key...)
	b.KeyEnds = append(b.KeyEnds, len(b.Keys))
	b.KeyGroups = append(b.KeyGroups, keyGroup)
	b.Times = append(b.Times, t)
	b.Values = append(b.Values, values...)
	b.Payloads = append(b.Payloads, payload...)
	b.PayloadEnds = append(b.PayloadEnds, len(b.Payloads))
	b.Offsets = append(b.Offsets, offset)
}

// AppendWatermarked adds one record with the watermark in effect before it.
func (b *Batch) AppendWatermarked(key []byte, keyGroup uint16, t int64, values []float64, payload []byte, offset uint64, wm int64) {
	b.Append(key, keyGroup, t, values, payload, offset)
	b.Watermarks = append(b.Watermarks, wm)
}

// MarkResumed marks the record appended last as arrived just after a
// resumed session. The marked records of a batch are taken as one range:
// an episode lasts far longer than a batch takes to fill.
func (b *Batch) MarkResumed() {
	n := b.Len()
	if b.ResumedTo == 0 {
		b.ResumedFrom = n - 1
	}
	b.ResumedTo = n
}

// Resumed reports whether record i was marked by MarkResumed.
func (b *Batch) Resumed(i int) bool { return i >= b.ResumedFrom && i < b.ResumedTo }

// Key returns record i's key. It aliases the batch.
func (b *Batch) Key(i int) []byte {
	start := 0
	if i > 0 {
		start = b.KeyEnds[i-1]
	}
	return b.Keys[start:b.KeyEnds[i]]
}

// Payload returns record i's original payload. It aliases the batch.
func (b *Batch) Payload(i int) []byte {
	start := 0
	if i > 0 {
		start = b.PayloadEnds[i-1]
	}
	return b.Payloads[start:b.PayloadEnds[i]]
}

// AppendArrival sets the arrival (processing time) of the record
// appended last: call it after every Append of a batch that carries them.
func (b *Batch) AppendArrival(ms int64) { b.Arrivals = append(b.Arrivals, ms) }

// HasArrivals reports whether every record of b carries its arrival.
func (b *Batch) HasArrivals() bool { return len(b.Arrivals) == b.Len() && b.Len() > 0 }

// AppendControl sets the captured control values of the record appended
// last: call it after every Append of a batch that carries them.
func (b *Batch) AppendControl(v []byte) {
	b.Controls = append(b.Controls, v...)
	b.ControlEnds = append(b.ControlEnds, len(b.Controls))
}

// Control returns record i's captured control values, nil when the batch
// carries none. It aliases the batch.
func (b *Batch) Control(i int) []byte {
	if len(b.ControlEnds) == 0 {
		return nil
	}
	start := 0
	if i > 0 {
		start = b.ControlEnds[i-1]
	}
	return b.Controls[start:b.ControlEnds[i]]
}

// RecordValues returns record i's aggregate arguments. It aliases the batch.
func (b *Batch) RecordValues(i int) []float64 {
	return b.Values[i*b.Stride : (i+1)*b.Stride]
}

// Edge connects one producer stage to one consumer stage.
type Edge struct {
	data     chan Message
	priority chan Message

	// A closed gate holds Send back: the consumer has read messages ahead
	// of processing them (an unaligned barrier overtook them), and they
	// still count against the edge's capacity, so backpressure holds.
	gateMu sync.Mutex
	closed bool
	open   chan struct{} // closed while the gate is open
}

// NewEdge returns an edge whose data channel holds capacity messages.
func NewEdge(capacity int) *Edge {
	open := make(chan struct{})
	close(open)
	return &Edge{data: make(chan Message, capacity), priority: make(chan Message, 4), open: open}
}

// Gate closes (true) or opens (false) the gate in front of the data
// channel. Only the consumer calls it.
func (e *Edge) Gate(closed bool) {
	e.gateMu.Lock()
	defer e.gateMu.Unlock()
	if closed == e.closed {
		return
	}
	e.closed = closed
	if closed {
		e.open = make(chan struct{})
	} else {
		close(e.open)
	}
}

// Len is the number of messages queued on the data channel.
func (e *Edge) Len() int { return len(e.data) }

// Send delivers m in order with the data before it, blocking while the edge
// is full or its gate closed (backpressure). It returns ctx.Err() if ctx
// ends first.
func (e *Edge) Send(ctx context.Context, m Message) error {
	e.gateMu.Lock()
	open := e.open
	e.gateMu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case e.data <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SendPriority delivers m ahead of queued data.
func (e *Edge) SendPriority(ctx context.Context, m Message) error {
	select {
	case e.priority <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TrySendPriority delivers m ahead of queued data if the priority channel
// has room, without blocking: for a sender that must never wait on a
// consumer that may be gone.
func (e *Edge) TrySendPriority(m Message) bool {
	select {
	case e.priority <- m:
		return true
	default:
		return false
	}
}

// Close tells the consumer that nothing more will be sent. Only the producer
// closes, once.
func (e *Edge) Close() { close(e.data) }

// Recv returns the next message, priority messages first. ok is false when
// the edge is closed and drained.
func (e *Edge) Recv() (m Message, ok bool) {
	select {
	case m := <-e.priority:
		return m, true
	default:
	}
	select {
	case m := <-e.priority:
		return m, true
	case m, ok := <-e.data:
		return m, ok
	}
}

// C exposes the data channel for consumers that select on it together with
// a timer. Such consumers must check Priority first.
func (e *Edge) C() <-chan Message { return e.data }

// Priority exposes the priority channel.
func (e *Edge) Priority() <-chan Message { return e.priority }
