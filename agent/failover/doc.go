// Package failover decides and sequences the restart of failover regions:
// the groups of pipelines that fail and restart together, while the others
// run on.
//
// It owns:
//
//   - the grouping (Regions): a pure function of plain descriptions of the
//     pipelines (Pipeline: name, source names, sink names). Pipelines that
//     share a source or a sink are in one region; every pipeline is in
//     exactly one.
//   - the restart strategies (Strategy: none, fixed_delay, failure_rate,
//     exponential_delay, as Flink's): pure, time and randomness come in as
//     arguments. Each region has one; the agent keeps one more for runs
//     that fail as a whole, which InheritRestarts and CarryRestarts keep in
//     step with the regions'.
//   - the limits (Limit, Limits): the regions whose strategy gave up, and
//     those down waiting for their next restart, with the one-line detail
//     /readyz shows.
//   - the restart procedure (Failover.Restart): drop a failure of a
//     generation already restarted; ask whether the failure is a full file
//     system before anything stops; stop the region; wait for space (not
//     counted by the strategy) or for the strategy's delay, counting the
//     restart in eddy_pipeline_restarts_total{pipeline}; start the region
//     again in a new generation; try again while the strategy allows, else
//     return an error wrapping ErrGaveUp.
//
// It is handed the pipelines' descriptions and Options (the restart
// configuration, a logger, a metrics set, a monotonic clock, randomness
// and a timer, so that its decisions run in tests without disks, clocks
// or sockets), and a Host, per call, that does each step on the agent's
// pipelines, sources, sinks, checkpointer and restorer. It never sees the
// agent itself.
//
// Failures arrive on Failed from any goroutine, through the callbacks Route
// and Host.StartRegion install; at most the channel's capacity are queued
// and the rest dropped, since one restart serves them all. Everything else
// runs on the caller's one goroutine, except Limits, which any goroutine
// may read.
package failover
