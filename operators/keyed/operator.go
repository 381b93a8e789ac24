package keyed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/state"
)

// Order is the order in which a key's readings are processed.
type Order uint8

const (
	// EventTime buffers each reading until the watermark passes it and
	// processes a key's readings in (time, seq) order; readings behind the
	// watermark are Late.
	EventTime Order = iota + 1
	// Arrival processes each reading at once, in arrival order.
	Arrival
)

// Options configure an Operator.
type Options struct {
	Order Order
	// TTL is the time to live of a key's per-key function state, refreshed
	// by every reading of the key; 0: forever.
	TTL time.Duration
	// Calls are the pipeline's per-key function calls (expr.KeyedCalls).
	Calls []expr.KeyedCall
	// CacheBytes bounds the memory of the per-key states kept decoded in
	// front of the backend (CachedValue); 0 means DefaultCacheBytes.
	CacheBytes int
	// Control: the readings carry captured control values
	// (Reading.Control), which the buffer keeps with them.
	Control bool
}

// Reading is one reading as the operator buffers and releases it.
type Reading struct {
	Key      []byte
	KeyGroup uint16
	// Time is the reading's time (event time, or processing time on a
	// pipeline without timestamps), ms.
	Time int64
	// Seq is the reading's position in its source (its record offset: the
	// ingest-log offset, or stream.ReadingOffset for one of several
	// readings of a message): readings of one time are processed in Seq
	// order, the order they came, and no two readings share one.
	Seq     uint64
	Payload []byte
	// Control is the control values captured for the reading when it
	// arrived (see Options.Control); the operator only carries them.
	Control []byte
}

// Outcome is what Process did with a reading.
type Outcome uint8

const (
	_        Outcome = iota
	Done             // processed now (Arrival)
	Buffered         // held until the watermark passes its time (EventTime)
	Late             // its time is not after the watermark: for the late side output
)

// TimerHandler runs when the watermark passes an event-time timer that
// per-key logic registered (RegisterTimer) for key at time t; the key is the
// current one of Context while it runs.
type TimerHandler func(keyGroup uint16, key []byte, t int64) error

// Handler processes one reading of the current key, in order. It may call
// Step to compute per-key function calls and use the states it registered
// on Context; the key's function state is written after it returns.
type Handler func(r *Reading) error

// Operator is the keyed process operator of one subtask: it orders each
// key's readings, keeps the per-key function state and hands the readings
// to a Handler one at a time. Pure and deterministic: no clock (the TTL
// clock is the readings' time), goroutine or file; state in a
// state.Backend. Not safe for concurrent use.
type Operator struct {
	be    state.Backend
	opts  Options
	buf   state.Bucket
	kc    *state.KeyedContext
	fns   *CachedValue[funcState]
	st    *funcState // the current key's, while a Handler runs
	wm    int64
	now   int64 // the TTL clock; math.MinInt64 until the first reading
	gen   uint64
	index pending        // the buffer's keys in release order, rebuilt after a Restore (gen)
	ready []pendingEntry // taken from index, being released (AdvanceWatermark)

	timers  *state.TimerQueue // time | keyGroup | key
	onTimer TimerHandler
	// Processing-time timers: the same layout in their own bucket, fired
	// by AdvanceProcessingTime.
	procTimers  *state.TimerQueue
	onProcTimer TimerHandler
	procNow     int64  // the processing time last given; math.MinInt64 before
	tkey        []byte // a timer being set or deleted
	fired       []byte // the timer firing
	below       []byte

	key, val []byte
	r        Reading
	blob     []byte // a reading's control values and payload (withControl)

	// The object cache of the per-key states, and the current key's slot
	// in it (-1: not cached) for the key curKG, curKey when curKnown.
	objs     objCache
	cur      int32
	curKG    uint16
	curKey   []byte
	curKnown bool
	saveKey  []byte // the current key while a slot is written back
	// hashKey, while release runs it, is the released reading's key, and
	// hash its hash (state.Clock.Hash), taken from the buffer.
	hashKey []byte
	hash    uint64
	compact []byte // scratch of funcState.compact

	// Overflowed counts the per-key function results that overflowed
	// float64 and were null instead (Step), LastOverflowed names the
	// function of the latest; read by the owner goroutine only.
	Overflowed     int64
	LastOverflowed expr.KeyedFunc
}

// Bucket and state names in the backend.
const (
	operatorName = "keyed"
	bufferBucket = operatorName + "/buffer"
	timerBucket  = operatorName + "/timers"
	procBucket   = operatorName + "/proctimers"
	bufferFormat = 1
	// maxPendingBytes bounds the buffered readings kept in memory; past
	// it they are read back from the backend when released.
	maxPendingBytes = 4 << 20
)

// New returns an operator keeping its state in be.
func New(be state.Backend, opts Options) (*Operator, error) {
	if opts.Order != EventTime && opts.Order != Arrival {
		return nil, fmt.Errorf("keyed: order %d: want EventTime or Arrival", opts.Order)
	}
	o := &Operator{be: be, opts: opts, wm: math.MinInt64, now: math.MinInt64, procNow: math.MinInt64}
	var err error
	if o.buf, err = be.Bucket(bufferBucket, bufferKeyGroup); err != nil {
		return nil, fmt.Errorf("keyed: %w", err)
	}
	o.kc, err = state.NewKeyedContext(be, operatorName, state.KeyedOptions{Now: func() int64 { return o.now }})
	if err != nil {
		return nil, fmt.Errorf("keyed: %w", err)
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	o.opts.CacheBytes = opts.CacheBytes
	o.objs = objCache{Clock: state.NewClock[objSlot](opts.CacheBytes), gen: be.Generation()}
	o.cur = -1
	dec := &funcState{}
	dec.reset(len(opts.Calls))
	// Without per-key calls (a pipeline with blocks only) run never reads
	// the function state: its entries would only take the cache's room.
	if o.fns, err = newCachedValue[funcState](o, "functions", funcCodec{st: dec}, (*funcState).load, (*funcState).memBytes, len(opts.Calls) == 0); err != nil {
		return nil, err
	}
	o.fns.deep = (*funcState).touch
	tb, err := be.Bucket(timerBucket, timerKeyGroup)
	if err != nil {
		return nil, fmt.Errorf("keyed: %w", err)
	}
	if o.timers, err = state.NewTimerQueue(be, tb, nil); err != nil {
		return nil, fmt.Errorf("keyed: %w", err)
	}
	pb, err := be.Bucket(procBucket, timerKeyGroup)
	if err != nil {
		return nil, fmt.Errorf("keyed: %w", err)
	}
	if o.procTimers, err = state.NewTimerQueue(be, pb, nil); err != nil {
		return nil, fmt.Errorf("keyed: %w", err)
	}
	o.gen = be.Generation()
	return o, nil
}

// Context is the keyed context of the operator's states: per-key logic
// hosted by a Handler registers its own states on it (they share the
// current key and the TTL clock).
func (o *Operator) Context() *state.KeyedContext { return o.kc }

// StateTTL is the TTL of the per-key states: that of the function state,
// and of the states per-key logic registers on Context (the pipeline's
// state_ttl).
func (o *Operator) StateTTL() state.TTLConfig {
	if o.opts.TTL <= 0 {
		return state.TTLConfig{}
	}
	return state.TTLConfig{TTL: o.opts.TTL, Update: state.OnCreateAndWrite, Visibility: state.NeverReturnExpired}
}

// MemoryBytes is what the operator holds in memory: the buffer (its runs,
// heap and arenas) and the object cache of per-key states.
func (o *Operator) MemoryBytes() int64 {
	return int64(o.index.memoryBytes()) + int64(o.objs.Bytes())
}

// CacheBudget returns the bound of the object cache (Options.CacheBytes).
func (o *Operator) CacheBudget() int { return o.opts.CacheBytes }

// Order returns the operator's order.
func (o *Operator) Order() Order { return o.opts.Order }

// Watermark returns the operator's watermark.
func (o *Operator) Watermark() int64 { return o.wm }

// Buffered returns the number of readings waiting for the watermark.
func (o *Operator) Buffered() (int, error) {
	if err := o.sync(); err != nil {
		return 0, err
	}
	return o.index.len(), nil
}

// Process takes reading r, whose arrival watermark was wm. With Arrival it
// runs h on it now (Done); with EventTime it is Late when r.Time ≤ wm, else
// Buffered until AdvanceWatermark passes r.Time. r is copied.
func (o *Operator) Process(r *Reading, wm int64, h Handler) (Outcome, error) {
	if o.opts.Order == Arrival {
		return Done, o.run(r, h)
	}
	if r.Time <= wm || r.Time <= o.wm {
		return Late, nil
	}
	if err := o.sync(); err != nil {
		return 0, err
	}
	o.key = appendBufferKey(o.key[:0], r)
	payload := r.Payload
	if o.opts.Control {
		payload = o.withControl(r)
	}
	o.index.push(r.Time, r.Seq, o.objs.Hash(r.Key), o.key, payload, false)
	if o.index.live > maxPendingBytes {
		// Memory is short: the buffer goes to the backend, whose cache
		// writes it back to the working file as it fills.
		if err := o.flushBuffer(); err != nil {
			return 0, err
		}
		o.index.dropPayloads()
	}
	return Buffered, nil
}

// AdvanceWatermark moves the watermark to wm (never back) and runs h on
// every buffered reading with Time ≤ wm, in (Time, Seq) order, and the
// TimerHandler on every timer at or before wm, in time order between them:
// a timer at t after the readings of time t (as Flink fires a timer when
// the watermark passes it, after the elements before that watermark).
func (o *Operator) AdvanceWatermark(wm int64, h Handler) error {
	if wm <= o.wm {
		return nil
	}
	o.wm = wm
	if err := o.sync(); err != nil {
		return err
	}
	for {
		// A group of readings at a time: their key lookups' cache misses
		// are taken together (objCache.touch), not one per reading.
		o.ready = o.index.popUpTo(wm, o.ready[:0], releaseGroup)
		if len(o.ready) == 0 {
			// No reading left to release: the timers up to wm.
			return o.fireTimers(o.timers, o.onTimer, wm, false)
		}
		o.objs.touch(o.ready)
		for i := range o.ready {
			if err := o.release(&o.ready[i], h); err != nil {
				return err
			}
		}
	}
}

// releaseGroup is the number of readings AdvanceWatermark takes from the
// buffer at a time.
const releaseGroup = 32

// release runs h on the popped entry e, after the timers before its time.
func (o *Operator) release(e *pendingEntry, h Handler) error {
	if err := o.fireTimers(o.timers, o.onTimer, e.time, true); err != nil { // the timers before e's time
		return err
	}
	// The popped key and payload stay in the index's arena until the next
	// push, which only Process does: the reading is run from there,
	// uncopied, unless its payload must be read back.
	key, payload := o.index.key(e), o.index.payload(e)
	format := o.memoryFormat()
	if payload == nil {
		o.key = append(o.key[:0], key...)
		v, ok, err := o.be.Get(o.buf, o.key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: indexed but not stored", errBuffer)
		}
		o.val = append(o.val[:0], v...)
		if len(o.val) < 1 {
			return errBuffer
		}
		key, payload, format = o.key, o.val[1:], o.val[0]
	}
	payload, control, err := splitBuffered(format, payload)
	if err != nil {
		return err
	}
	if e.stored {
		if err := o.be.Delete(o.buf, key); err != nil {
			return err
		}
	}
	if len(key) < bufferKeyHead {
		return errBuffer
	}
	o.r = Reading{Time: e.time, Seq: e.seq, KeyGroup: binary.BigEndian.Uint16(key[16:]), Key: key[bufferKeyHead:], Payload: payload, Control: control}
	// The buffer hashed the key when it came: slot need not again.
	o.hashKey, o.hash = o.r.Key, e.hash
	err = o.run(&o.r, h)
	o.hashKey = nil
	return err
}

// RegisterTimer sets an event-time timer at t for the current key (of
// Context): the TimerHandler runs when the watermark reaches t. Setting
// one twice is setting it once.
func (o *Operator) RegisterTimer(t int64) error { return o.addTimer(o.timers, t) }

// DeleteTimer removes the current key's timer at t, if set.
func (o *Operator) DeleteTimer(t int64) error { return o.deleteTimer(o.timers, t) }

// OnTimer sets the handler of the timers.
func (o *Operator) OnTimer(h TimerHandler) { o.onTimer = h }

// RegisterProcessingTimer sets a processing-time timer at t for the current
// key: the handler set with OnProcessingTimer runs when AdvanceProcessingTime
// reaches t. Setting one twice is setting it once. The timers are state:
// checkpointed, restored by key group, and one whose time passed while the
// agent was down fires at the first AdvanceProcessingTime after the restore
// (as Flink's do).
func (o *Operator) RegisterProcessingTimer(t int64) error { return o.addTimer(o.procTimers, t) }

// DeleteProcessingTimer removes the current key's processing-time timer at
// t, if set.
func (o *Operator) DeleteProcessingTimer(t int64) error { return o.deleteTimer(o.procTimers, t) }

// OnProcessingTimer sets the handler of the processing-time timers.
func (o *Operator) OnProcessingTimer(h TimerHandler) { o.onProcTimer = h }

// ProcessingTime returns the processing time last given to
// AdvanceProcessingTime, math.MinInt64 before the first.
func (o *Operator) ProcessingTime() int64 { return o.procNow }

// AdvanceProcessingTime moves processing time to now (never back; the
// caller reads its clock, the operator none) and runs the processing-time
// handler on every timer at or before now, in time order (keys of one time
// in key group and key order). The TTL clock does not move: it stays the
// readings' time.
func (o *Operator) AdvanceProcessingTime(now int64) error {
	o.procNow = max(o.procNow, now)
	return o.fireTimers(o.procTimers, o.onProcTimer, o.procNow, false)
}

func (o *Operator) addTimer(q *state.TimerQueue, t int64) error {
	kg, key := o.kc.CurrentKey()
	o.tkey = appendTimerKey(o.tkey[:0], t, kg, key)
	_, err := q.Add(o.tkey)
	return err
}

func (o *Operator) deleteTimer(q *state.TimerQueue, t int64) error {
	kg, key := o.kc.CurrentKey()
	o.tkey = appendTimerKey(o.tkey[:0], t, kg, key)
	_, err := q.Delete(o.tkey)
	return err
}

// fireTimers runs h on the timers of q before t (before: exclusive), or at
// or before it. Event-time timers (q is o.timers) move the TTL clock.
func (o *Operator) fireTimers(q *state.TimerQueue, h TimerHandler, t int64, before bool) error {
	if q.Len() == 0 {
		return nil
	}
	below := o.below[:0] // nil: no bound (t is MaxInt64)
	switch {
	case before:
		below = state.AppendOrderedTime(below, t)
	case t < math.MaxInt64:
		below = state.AppendOrderedTime(below, t+1)
	default:
		below = nil
	}
	if below != nil {
		o.below = below // reused: processing time moves on at every batch and tick
	}
	for {
		k, ok, err := q.Pop(below)
		if err != nil || !ok {
			return err
		}
		tt, _ := state.OrderedTime(k)
		o.fired = append(o.fired[:0], k...)
		kg, key := binary.BigEndian.Uint16(o.fired[8:]), o.fired[timerKeyHead:]
		if q == o.timers {
			o.now = max(o.now, tt)
		}
		o.kc.SetCurrentKey(kg, key)
		if h != nil {
			if err := h(kg, key, tt); err != nil {
				return err
			}
		}
	}
}

// Timer entries: key = time (state.AppendOrderedTime) | keyGroup:u16be | key.
func appendTimerKey(dst []byte, t int64, kg uint16, key []byte) []byte {
	dst = state.AppendOrderedTime(dst, t)
	dst = binary.BigEndian.AppendUint16(dst, kg)
	return append(dst, key...)
}

const timerKeyHead = 8 + 2

// timerKeyGroup is the state.KeyGroupFunc of the timer bucket.
func timerKeyGroup(k []byte) (uint16, bool) {
	if len(k) < timerKeyHead {
		return 0, false
	}
	return binary.BigEndian.Uint16(k[8:]), true
}

// Flush writes the buffered readings not yet in the backend into it, and
// the per-key states changed in the object cache: call it at a checkpoint
// barrier before Backend.Snapshot, so the snapshot holds every reading
// waiting for the watermark and every key's state.
func (o *Operator) Flush() error {
	if err := o.flushBuffer(); err != nil {
		return err
	}
	return o.flushCache()
}

// flushBuffer writes the buffered readings not yet in the backend into it.
func (o *Operator) flushBuffer() error {
	if err := o.sync(); err != nil {
		return err
	}
	return o.index.each(func(e *pendingEntry) error {
		if e.stored {
			return nil
		}
		o.val = append(append(o.val[:0], o.memoryFormat()), o.index.payload(e)...)
		if err := o.be.Put(o.buf, o.index.key(e), o.val); err != nil {
			return err
		}
		e.stored = true
		return nil
	})
}

// run processes r with its key's function state loaded and written back.
func (o *Operator) run(r *Reading, h Handler) error {
	o.now = max(o.now, r.Time)
	o.kc.SetCurrentKey(r.KeyGroup, r.Key)
	if len(o.opts.Calls) == 0 {
		return h(r)
	}
	e, slot, err := o.fns.entry()
	if err != nil {
		return err
	}
	if !e.has {
		e.v.reset(len(o.opts.Calls))
	}
	o.st = &e.v
	if err := h(r); err != nil {
		return err
	}
	o.compact = o.st.compact(o.compact)
	return o.fns.written(e, slot)
}

// Step computes the per-key calls idx (indexes into Options.Calls, as
// expr.Program.KeyedCalls gives them) for rec, of the reading the Handler
// is processing, into rec.Keyed, and updates the key's state. Call it
// before evaluating the program that reads them.
func (o *Operator) Step(rec *event.Record, idx []int) {
	if len(rec.Keyed) != len(o.opts.Calls) {
		rec.Keyed = append(rec.Keyed[:0], make([]event.Value, len(o.opts.Calls))...)
	}
	for _, i := range idx {
		if o.st.step(o.opts.Calls, i, rec) {
			o.Overflowed++
			o.LastOverflowed = o.opts.Calls[i].Func
		}
	}
}

// Cleanup removes up to n expired per-key states (the incremental part of
// the TTL cleanup; expired state is never returned either way). Call it
// per batch, not per reading.
func (o *Operator) Cleanup(n int) error {
	if o.now == math.MinInt64 {
		return nil // no reading yet (a fresh start, a restore): no clock to expire by
	}
	_, err := o.kc.Cleanup(n)
	return err
}

// FilterSnapshot drops the expired per-key states from snap (the TTL
// cleanup at snapshots); see state.KeyedContext.FilterSnapshot.
func (o *Operator) FilterSnapshot(snap state.Snapshot) state.Snapshot {
	if o.now == math.MinInt64 {
		return snap // no clock yet: nothing is known to be expired
	}
	return o.kc.FilterSnapshot(snap)
}

// SetWatermark sets the watermark restored from a checkpoint.
func (o *Operator) SetWatermark(wm int64) { o.wm = max(o.wm, wm) }

// sync rebuilds the buffer's index after the backend was restored.
func (o *Operator) sync() error {
	if g := o.be.Generation(); g != o.gen {
		o.gen = g
		o.index.reset()
		var bad error
		err := o.be.Scan(o.buf, nil, func(k, _ []byte) bool {
			t, err := state.OrderedTime(k)
			if err != nil || len(k) < bufferKeyHead {
				bad = errBuffer
				return false
			}
			o.index.push(t, binary.BigEndian.Uint64(k[8:]), o.objs.Hash(k[bufferKeyHead:]), k, nil, true)
			return true
		})
		if err == nil {
			err = bad
		}
		return err
	}
	return nil
}

// Buffer entries: key = time (state.AppendOrderedTime) | seq:u64be |
// keyGroup:u16be | key; value = format:u8=1 | payload, or format:u8=2 |
// the blob of control.go.
func appendBufferKey(dst []byte, r *Reading) []byte {
	dst = state.AppendOrderedTime(dst, r.Time)
	dst = binary.BigEndian.AppendUint64(dst, r.Seq)
	dst = binary.BigEndian.AppendUint16(dst, r.KeyGroup)
	return append(dst, r.Key...)
}

const bufferKeyHead = 8 + 8 + 2

// bufferKeyGroup is the state.KeyGroupFunc of the buffer bucket.
func bufferKeyGroup(k []byte) (uint16, bool) {
	if len(k) < bufferKeyHead {
		return 0, false
	}
	return binary.BigEndian.Uint16(k[16:]), true
}

var errBuffer = errors.New("keyed: corrupt buffered reading")
