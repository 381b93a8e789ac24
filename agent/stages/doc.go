// Package stages runs a pipeline block: its plan compiled from the
// configuration, and the goroutines of its running form between the
// source runners and the sink runners.
//
// A stage's decisions are pure code in package operators, with no
// goroutine, channel or file: operators.Preparer (decode, timestamp,
// filter, map, key), operators.WindowTask (windows, timers, state),
// operators.KeyedStage (per-key functions and blocks) and
// operators.KeyBudget (max_keys). This package runs them: the goroutine
// around each, the edges between them, the barriers that cross them and
// the state and snapshot I/O they ask for. A change to what a stage
// computes belongs there; a change to how it runs belongs here.
//
// It owns:
//   - the plan (Compile, build.go, keyed.go): every expression compiled,
//     the decoder built, the window specified, the per-key functions and
//     blocks of a keyed pipeline; no I/O, so `eddy validate` compiles too.
//   - the Pipeline (New, pipeline.go): a prepare stage (prepare.go:
//     decode, timestamp, the watermark generators of watermarks.go and the
//     hold after a resumed session of resume.go, filter, map, key, routing)
//     feeding N window subtasks (subtask.go) over edges of stream batches;
//     each subtask runs its window task, with a keyed stage in front of it
//     for per-key functions (keyed.go), the key budget of max_keys
//     (keylimit.go) and, for a bounded file, the ordered output held in its
//     state until the input ends (ordered.go).
//   - checkpoints as the stages take part: aligned barriers and snapshots
//     (barrier.go), unaligned ones that overtake queued records and store
//     them with the snapshot (unaligned.go, Announce, InFlightSummary),
//     and a checkpoint's restore into a pipeline just built (Restore,
//     restore.go): state by key group, in-flight records, control,
//     resume and watermark state, refused when the state shape (shape.go)
//     or the window state layout changed; CheckRestore decides the
//     former from the manifest alone, for run and validate alike.
//   - the rollover of a changed pipeline (rollover.go): each checkpoint
//     records the pipeline's block, its newest event time and, during a
//     rollover, the cut; CheckRollover decides from the manifest and the
//     moment of the restore alone whether a change rolls over and where
//     it cuts (on processing time, after the restore), CompileOld
//     compiles the old definition to run beside the new one (SetRollover:
//     the event times or arrivals each takes; once the old one has fired
//     its last window it retires and takes nothing), CompileKept the
//     previous definition of a change that cannot roll over.
//   - the messages on its edges: SourceBatch from a source runner, SinkMsg
//     to a sink runner; the runners use these types.
//   - each pipeline's counters (Metrics, metrics.go: the metric names it
//     registers) and its rate-limited log lines (ratelimit.go).
//
// It is handed, and never reaches past: the Plan; Options of plain values
// (the configuration's text, the device id, max_key_groups, the alignment
// policy, a subtask's share of the state cache), a function that opens a
// subtask's state backend (whose owner closes it, Backends), the Metrics
// kept across rebuilds, a logger, a Clock and a failure function; its
// sinks as Sink values (a channel, the limits a result respects, Done);
// and the checkpoint driver as Checkpoints. Connecting a pipeline to the
// runners (which sink and source, producer counts) is its owner's.
//
// Goroutines: Start runs one for the prepare stage and one per window
// subtask, and ends when the input channels are closed and every message
// is handed on; a panic in a stage fails the pipeline (the fail function)
// and its input is drained so that no runner blocks on it. State and
// checkpoint formats (the held results' keys, the in-flight summary and
// the manifest's extra entries) are fixed here; snapshot files and
// manifests are the checkpoint package's.
package stages
