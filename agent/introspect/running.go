package introspect

import (
	"context"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/upload"
)

// Setup is what the view is handed when the agent is built: all of it is
// fixed for the agent's run.
type Setup struct {
	DeviceID string
	// Metrics is the agent's metric set: WriteMetrics serves it,
	// RegisterMetrics adds the derived gauges to it, and the reports read
	// the gauges other parts register there (eddy_mqtt_connected{source},
	// eddy_wal_*{sink}), by name, when asked.
	Metrics *metrics.Set
	// Pipelines in configuration order.
	Pipelines []Pipeline
	// Sources are the sources pipelines read, in any order.
	Sources []*config.Source
	// Sinks are the sinks pipelines write to, in configuration order; those
	// with a WAL (exactly-once MQTT) are reported.
	Sinks []*config.Sink
	// Upload is the upload block's destination (Endpoint, Bucket and the
	// expanded Prefix); nil without an upload block.
	Upload *admin.UploadReport
}

// Pipeline is one pipeline as configured.
type Pipeline struct {
	Name        string
	EventTime   bool // it has a watermark
	LateOutput  bool // late readings go to late_output, not dropped
	Stateful    bool // its subtasks keep state (a window, per-key functions)
	Parallelism int
	// Counters outlive region restarts: one value serves the pipeline for
	// the agent's run.
	Counters Counters
}

// Counters are one pipeline's live counters. Safe for concurrent use.
type Counters interface {
	// Status is the counters now; Name and Parallelism are left empty.
	Status() admin.PipelineStatus
	// DeadLetteredByReason is a copy of the dead-letter counts by reason.
	DeadLetteredByReason() map[string]uint64
	// State sums the subtasks' last state samples; nil without state.
	State() *admin.StateReport
}

// Running is the agent's live state, read on every request and scrape.
// Every method is safe for concurrent use with the agent's work and
// returns values the caller may keep.
type Running interface {
	// Ingest reports the ingest logs (sources that cannot replay), sorted
	// by source name.
	Ingest() []admin.IngestReport
	// WALRefusal is why the broker refused the WAL of sink, "" if it did
	// not (or the sink has no WAL open).
	WALRefusal(sink string) string
	// UploadStats are the uploader's figures; nil before it started or
	// without an upload block.
	UploadStats() *upload.Stats
	// Disk is the disk budget's report; nil before it is measured.
	Disk() *admin.DiskReport
	// Checkpoints are the checkpointer's settings, statistics and history
	// (oldest first), ConsecutiveFailures left 0; ok is false while
	// checkpoints are not set up.
	Checkpoints() (rep admin.CheckpointReport, ok bool)
	// DiskFull is why the disk counts as full, "" while nothing waits for
	// disk space.
	DiskFull() string
	// RestartLimits are the regions whose restart strategy gave up, then
	// those down waiting for their next restart.
	RestartLimits() []RestartLimit
	// ClockSynchronized says whether the wall clock is synchronised.
	ClockSynchronized() bool
	// Savepoint takes a savepoint, as admin.Agent's Savepoint.
	Savepoint(ctx context.Context) (id uint64, err error)
}

// RestartLimit is a region that is not running because of its restart
// strategy: /readyz fails the check "restarts/"+Pipelines with Detail.
type RestartLimit struct {
	Pipelines string // the region's pipelines, comma-separated
	Detail    string // one line
	// Check names the readiness check when it is not the region's
	// "restarts/<pipelines>": "config/<pipeline>" for a pipeline that
	// keeps running its previous definition.
	Check string
}
