// Package checkpointing drives checkpoints: it owns one
// checkpoint.Coordinator (a pure state machine) and does its I/O.
//
// A Driver owns the coordinator, the snapshot files it writes and merges in
// the checkpoint.Store it is handed, the manifests, retention, savepoints
// (bounded by max_savepoints), the history of the last 100 checkpoints and
// the eddy_checkpoint* metrics. Exactly one goroutine, Run's, steps the
// coordinator; every other caller reaches it through messages (Send,
// Savepoint, Final, SuspendRegion, ResumeRegion), so none of them races it.
//
// It is handed, and never reaches past:
//   - Sources (Source): where barriers enter, what they forwarded, and
//     their ingest log's fullness, which paces checkpoints: a periodic
//     checkpoint that would repeat the last is skipped, and one that a full
//     ingest log waits for is hurried.
//   - exactly-once sinks (TxSink): committed in the order handed, once per
//     completed checkpoint, before its OnCompleted callbacks run; while one
//     waits for room, checkpoints stall rather than time out.
//   - plain values (Config): the store, retain, interval, timeout,
//     max_savepoints, a logger, a monotonic clock, a metrics set, and two
//     optional functions: Announce (unaligned checkpoints' early trigger)
//     and InFlight (a manifest's in-flight summary, for the log).
//
// Subtasks hand their state with WriteSnapshot, which writes in the
// background; WaitWriters waits for those writes and chain merges, after
// which no handed snapshot is read. On-disk formats are the checkpoint
// package's.
package checkpointing
