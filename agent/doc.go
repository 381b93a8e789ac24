// Package agent builds Eddy's pipelines from a configuration and runs them:
// the embedded broker, sources, the per-pipeline stages, sinks, checkpoints,
// uploads and the admin endpoint. It starts the pipelines' goroutines and
// does the checkpoints' and the state's I/O; the I/O stages it opens
// (operators/io: the broker, sources, the ingest log, sinks) run their own
// goroutines for their connections and files. What it drives to decide
// (decoders, expressions, window operators, the checkpoint coordinator) is
// pure logic.
//
// Life cycle: Run loads and compiles the configuration (agent.go, each
// pipeline by stages.Compile), opens sinks, pipelines and sources
// (sink_open.go, pipeline_open.go, source_open.go), then runs (run.go):
// checkpoints are set up and the newest checkpoint that verifies restored
// (restoreselect.go: else the newest uploaded one, else an empty start,
// refused when an ingest log no longer reaches its start), the admin
// endpoint starts, then sinks, then pipelines, then sources. Cancelling the
// context (SIGINT, SIGTERM) stops the sources; every record already taken in
// drains through the pipelines and sinks (drain.go), a final checkpoint
// commits it, and Run returns. A file source that reaches its end flushes
// every window and, when every source has ended, Run returns without a
// signal. A run that fails as a whole is run again by the restart strategy
// (agent/failover); a reload (SIGHUP, reload.go) ends the run with a final
// checkpoint and starts the new configuration from it.
//
// The Agent runs the phases of a run (run.go) and composes one type per
// concern, each owning its state:
//
//   - dataflow (dataflow.go): the job graph the configuration opened — the
//     embedded broker (broker.go), the sources, sinks and pipelines, their
//     state backends, ingest logs and WALs — under the lock a region
//     restart takes to replace parts of it. It opens them (pipeline_open.go,
//     source_open.go, sink_open.go), says when they have drained or gone
//     idle and waits for the WAL sinks' delivery (drain.go), and trims the
//     ingest logs to what retained checkpoints need.
//   - the pipelines (package agent/stages): stages.Pipeline is one
//     pipeline block's stages — the prepare stage, the window or keyed
//     subtasks, their aligned and unaligned barriers and snapshots, and a
//     checkpoint's restore into them — built by dataflow.newPipeline
//     (pipeline_open.go) from a stages.Plan with plain options, then
//     connected to the runners there: each sink runner as a stages.Sink,
//     each source runner sending stages.SourceBatch on the pipeline's
//     inputs.
//   - sourceRunner and sinkRunner (source.go, sinks.go): a source's reader
//     with its ingest log (ingest.go), and a sink with its two-phase commit.
//   - the checkpoint driver (package agent/checkpointing): drives
//     checkpoint.Coordinator and does its I/O — barriers, snapshot files,
//     manifests, sink commits, retention, savepoints, and the checkpoints a
//     full ingest log needs to shrink; its store's full disk is a
//     disk.Watch. restore.go sets it up; the runners serve it through
//     checkpointing.Source and TxSink (checkpoint_runners.go).
//   - restorer (restore.go): chooses the checkpoint a start restores
//     (restoreselect.go), loads a checkpoint into pipelines just built and
//     rewinds their sources, at start and for a restarted region. Whether
//     a start restores, drops or refuses is decided by decideEmptyStart
//     and planRestore (over stages.CheckRestore), which eddy validate
//     also runs, read-only, to print what a start would do (validate.go).
//   - failover regions (package agent/failover): groups the pipelines into
//     regions, decides each restart by its strategy and records the
//     regions that gave up or wait to restart; regionHost (regions.go)
//     stops, rebuilds, restores and starts the region that failed while
//     the others run on.
//   - the disk (package agent/disk): the budget and the eddy_disk_* gauges
//     (disk.Meter, built in run.go), what waits for disk space and on which
//     file system (disk.Holds: the ingest intakes, the state's rebuild in
//     restore.go, the failover regions), and whether a write failed on a
//     full disk (disk.ShortageOf). The agent only wires them.
//   - the off-device copy (package agent/offsite): ships completed
//     checkpoints to S3 (offsite.Uploader, started in run.go) and fetches
//     the newest uploaded one that verifies for the restorer when no local
//     one does (restoreselect.go). The agent hands it plain values
//     (offsite.Target, resolved in offsite.go from the upload block and
//     data_dir's device id), the checkpoint store and the
//     checkpointing.Driver, which are offsite.Store and
//     offsite.Checkpointer as they are. The CLI's checkpoint commands
//     (checkpointcmds.go: restore --from s3://…, checkpoints ls and show,
//     savepoint; savepoints.go: savepoint rm) stay here: they load the
//     configuration file and, for S3, settle the device id.
//   - the admin endpoint's view (package agent/introspect): reports,
//     readiness and derived metrics from an introspect.Setup built once and
//     the introspect.Running the agent implements (introspection.go);
//     adminEndpoint (endpoint.go) starts and stops the endpoint, which is
//     package agent/admin.
package agent
