// Package keyed is the keyed process operator of one subtask: it orders
// each key's readings, keeps per-key state and runs per-key logic on the
// readings one at a time, in order. It backs the per-key functions of
// expressions (prev, changed, delta, since, first_seen, count_key; see
// operators/expr and docs/keyed-state.md).
//
// # Model
//
// An Operator is pure and deterministic, like window.Operator: no clock,
// goroutine or file inside; the caller drives it with readings and
// watermarks, and a Handler gets each reading when its turn comes:
//
//	op.Process(&r, arrivalWM, h)   // Done (arrival order) | Buffered | Late
//	op.AdvanceWatermark(wm, h)     // releases what the watermark passed
//
// Inside h, the caller evaluates its expressions (Evaluator does it for a
// pipeline: decode, filter, map, aggregate arguments), calling Step before
// each expression to compute the per-key calls it reads into
// Record.Keyed. Other per-key logic (a state machine per key: a reading in,
// its state, outputs, the next timer) registers its own states on Context
// and sets event-time timers for the current key with RegisterTimer; the
// TimerHandler set with OnTimer runs when the watermark passes one,
// between the released readings in time order (after the readings of its
// own time). Processing-time timers (RegisterProcessingTimer, handled by
// the OnProcessingTimer handler) fire when the caller moves processing
// time on with AdvanceProcessingTime: the operator reads no clock, the
// caller gives it the time, so a test drives it with a fake clock. Both
// kinds are kept in the backend (time | key group | key, one bucket each,
// popped through a state.TimerQueue) and checkpointed; after a restore, a
// processing-time timer whose time passed while the agent was down fires
// at the first AdvanceProcessingTime, as in Flink.
//
// # Order
//
// With EventTime, a reading is held until the watermark passes its time,
// then released with the others the watermark passed in (time, seq)
// order, seq being its source offset. A reading whose time is not after the
// watermark when it arrives is Late (the caller sends it to the late side
// output); it never reaches the state. So a key's readings reach h in
// event-time order, and that sequence is the same whatever the batching,
// timing, parallelism or restarts: which readings are late is decided by
// the watermark each reading arrived with, which the prepare stage
// computes from the input alone. With Arrival, h runs at once: lowest
// latency, and prev means "previous to arrive".
//
// The buffer is one bucket of the subtask's backend (time | seq | key
// group | key → payload), not one list per key: the watermark releases a
// time range across keys. An in-memory index of the buffered entries' keys
// (FIFO runs of in-order arrivals, a heap for the stragglers) gives the
// release order, so a release costs a Get and a Delete through
// the write-back cache per reading, not a Scan (which would flush the cache,
// a bbolt commit per watermark); it is rebuilt from the bucket after a
// restore. The key group in the entry lets a restore with another
// parallelism hand each entry to its subtask (state.KeyGroupFunc). The
// entries are checkpointed with the rest of the state, so a restore
// releases exactly the readings that were waiting. The buffer holds what
// arrives within the watermark's out-of-orderness bound.
//
// # State and TTL
//
// The per-key function state of a key is one value holding every call's
// state, whatever the number of calls. It and the blocks' states are
// CachedValues: they stay decoded in the operator's object cache between
// readings (one state.Clock lookup per reading for all of a key's states), and go
// to the backend, encoded, at Flush (a checkpoint) or when their key is
// evicted; the cache is bounded by Options.CacheBytes and passes keys
// through to the backend when full. With a TTL it follows Flink's
// StateTtlConfig (OnCreateAndWrite, NeverReturnExpired): every reading
// writes the state and so refreshes it; an expired value is never
// returned; Cleanup removes expired values incrementally and
// FilterSnapshot leaves them out of checkpoints. Flink's TTL reads the
// processing-time clock; here the clock is the time of the reading being
// processed (event time on event-time pipelines; the greatest seen, which
// with EventTime order is that reading's), so a replay expires the same
// state at any parallelism.
package keyed
