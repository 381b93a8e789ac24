// Package window is Eddy's window operator as pure, deterministic logic,
// with Apache Flink's semantics.
//
// # Model
//
// An Operator is shaped like etcd/raft's RawNode: it reads no clock, starts no
// goroutine and does no I/O. The caller drives it with three inputs and
// collects one output:
//
//	op.Process(&elem, &out)             // a reading: returns Accepted | Late | Unassigned
//	op.AdvanceWatermark(wm, &out)       // event time moves (from package watermark)
//	op.AdvanceProcessingTime(now, &out) // the caller's processing time moves
//	out.Firings                         // results: Final | Early | LateUpdate
//
// State (window accumulators, session sets, count-window counters, timers)
// sits behind the Store interface; MemoryStore is the in-memory twin, and
// StateStore keeps it in a state.Backend (bbolt) with the byte layouts of
// statekey.go, live windows decoded in a bounded object cache in front (call
// StateStore.Flush before Backend.Snapshot). One Operator and one Store serve one parallel subtask; neither
// is safe for concurrent use. Because the operator only reacts to its inputs,
// the same inputs always give the same outputs, in the same order.
//
// # Life cycle
//
//  1. Build: op, err := NewOperator(spec, NewMemoryStore()). Errors wrap
//     ErrBadSpec.
//  2. For each reading (already keyed: Key, KeyGroup = state.KeyGroup(key,
//     maxKeyGroups); future-skewed readings already dead-lettered), call
//     Process. Send Late readings to the late-data side output (or count
//     them), count Unassigned ones. The operator copies what it keeps.
//  3. After a batch, call AdvanceWatermark with the combined watermark and,
//     for processing-time windows or early firings, AdvanceProcessingTime.
//  4. Hand out.Firings to the sinks, then out.Reset(). Firing.Key and Values
//     alias the Output's memory and are valid until that Reset.
//  5. End of input: AdvanceWatermark(math.MaxInt64) fires and purges every
//     event-time window and flushes processing-time windows.
//
// # Rules (each pinned by testdata/conformance; sources cited)
//
// Assignment (Flink TimeWindow.getWindowStartWithOffset,
// Tumbling/Sliding/Session windows, countWindow, GlobalWindows):
//   - Window start = t − ((t − offset) floor-mod size), 0 ≤ r < size even for
//     negative t − offset (StartOf). Any offset works; offsets o and o + size
//     give the same windows (Flink takes abs(offset) < size, or < slide for
//     sliding windows, and so does the configuration: "-8h" on 24 h windows
//     starts the days at midnight in UTC+8).
//   - Sliding: t belongs to every [s, s+size) with s ≡ offset (mod slide) and
//     t − size < s ≤ t. With slide > size, t may belong to none: the verdict
//     is Unassigned — unless t + L ≤ watermark, which Flink sends to the late
//     side output (isSkippedElement && isElementLate), so Late.
//   - Session: [t, t+gap), merged with every window of the key it overlaps or
//     touches (TimeWindow.intersects). Lateness is judged on the merged
//     window, so a reading too late alone is accepted if it joins a live
//     session.
//   - Count: reading number c of a key (0-based) belongs to every [s, s+n)
//     with s a multiple of m and s ≤ c < s+n; a window fires Final on its last
//     reading and is purged. Partial count windows never fire (Flink).
//   - Global: one window [min, max) per key; fires Final at end of input
//     (Flink's never fires; Eddy flushes it), earlier with TriggerCount or
//     EarlyEvery.
//
// Firing (Flink EventTimeTrigger, ProcessingTimeTrigger, CountTrigger,
// ContinuousProcessingTimeTrigger; the output record of README "Configuration"):
//   - An event-time window fires Final when the watermark reaches End−1; a
//     processing-time window when processing time reaches End−1.
//   - EarlyEvery > 0: open windows fire Early at processing times that are
//     multiples of EarlyEvery, until their final firing.
//   - TriggerCount > 0: a window fires Early every TriggerCount readings.
//   - Every firing carries the full aggregate so far, never a delta. Seq
//     numbers the firings of a (key, window) from 0. A session created by a
//     merge is a new window (Seq from 0); one that keeps its bounds goes on.
//   - Order: the firings of one AdvanceWatermark/AdvanceProcessingTime come
//     by timer time (window end), then key bytes, then window start; several
//     subtasks' outputs merged in that order equal a single subtask's. Flink
//     fires timers by time too (InternalTimerServiceImpl.advanceWatermark);
//     among timers of equal time its order is unspecified (the heap's or
//     the state backend's), and key bytes, then window start, is one of its
//     possible orders.
//   - The firings a reading causes (LateUpdate, TriggerCount) come in the
//     order of AssignWindows, each its own firing: a late reading re-fires
//     its sliding windows latest start first, as Flink's
//     WindowOperator.processElement walks SlidingEventTimeWindows.assignWindows.
//
// Lateness (Flink WindowOperator.isWindowLate,
// isElementLate, cleanupTime, allowedLateness):
//   - An event-time window's state lives until the watermark reaches
//     cleanup = End−1+AllowedLateness (saturating); then it is purged without
//     firing. Processing-time windows are purged right after their final.
//   - A reading for a window with End−1 ≤ watermark < cleanup is added and the
//     window re-fires at once as LateUpdate (also if the window is created by
//     that reading, with Seq 0). A late reading that bridges two fired
//     sessions merges them (their accumulators merged) and the merged window
//     fires LateUpdate.
//   - A reading whose every window is past cleanup is Late and changes no
//     state.
//
// Panes (pane.go): a sliding window whose slide divides its size
// (without TriggerCount or EarlyEvery) is evaluated in panes of one slide: a
// reading folds into its pane only, and a window merges its size/slide panes
// when it fires. Firings, their order, Seq and Kind are those of the rules
// above; sums are added pane by pane (they may differ in the last bits from
// a reading-by-reading sum). The Store then holds panes, not windows, and
// a window's firing timer is registered when the window before it fires
// (or by its earliest pane's first reading), not when it is created.
//
// Timers live in the Store keyed by (domain, time, key, key group, window):
// a firing timer at End−1 and a cleanup timer at End−1+L per window (one
// when equal), plus an early timer. The store hands them out in time order,
// so no heap of every window is needed.
//
// Watermarks, idleness and future skew are computed by package watermark;
// aggregates and their byte encoding by package aggregate.
package window
