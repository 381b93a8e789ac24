package admin

// The reports the endpoint serves, as JSON: what an Agent returns is
// encoded as it is. Field names are the API's; a field is null ("not
// reported") only where its comment says so.

// PipelineStatus is a pipeline's counters.
type PipelineStatus struct {
	Name         string `json:"name"`
	ReadingsIn   uint64 `json:"readings_in"`
	ResultsOut   uint64 `json:"results_out"`
	Filtered     uint64 `json:"filtered"`
	Late         uint64 `json:"late"`
	Unassigned   uint64 `json:"unassigned"`
	DeadLettered uint64 `json:"dead_lettered"`
	// WatermarkMs is null before the first watermark and on processing time.
	WatermarkMs *int64 `json:"watermark_ms"`
	Parallelism int    `json:"parallelism"`
}

// PipelineReport is one element of GET /api/pipelines: PipelineStatus (the
// counters) plus what is derived from them.
type PipelineReport struct {
	PipelineStatus
	// EventTime is false for processing-time pipelines, which have no
	// watermark.
	EventTime bool `json:"event_time"`
	// WatermarkLagMs is the device's wall clock minus the watermark, or null
	// before the first watermark. The watermark trails the newest event time
	// by the out-of-orderness bound (+1 ms), so the lag never drops below it.
	WatermarkLagMs *int64 `json:"watermark_lag_ms"`
	// LateOutput tells whether late readings go to a late_output sink
	// (late_output set) or are counted and dropped.
	LateOutput bool `json:"late_output"`
	// Dropped counts readings no output received: late readings without a
	// late_output, plus unassigned ones (between sliding windows). Filtered
	// and dead-lettered readings are counted apart.
	Dropped uint64 `json:"dropped"`
	// DeadLetteredByReason splits DeadLettered by reason.
	DeadLetteredByReason map[string]uint64 `json:"dead_lettered_by_reason"`
	// State is what the pipeline's state stores held at the last
	// checkpoint; null for a pipeline without a window.
	State *StateReport `json:"state"`
}

// StateReport is what a pipeline's (or one subtask's) state holds, in GET
// /api/pipelines and the eddy_state_* gauges.
type StateReport struct {
	Keys      int64 `json:"keys"`       // entries in the state stores
	FileBytes int64 `json:"file_bytes"` // bbolt working files in use (0 on the memory backend)
	// FileWrittenBytes is what the bbolt working files had written to them
	// since they were opened (state.Usage.WrittenBytes): the wear they cause.
	FileWrittenBytes int64 `json:"file_written_bytes"`
	// CheckpointReads counts the lookups the checkpoint files answered
	// (state { read_checkpoints }): misses of the cache and working file.
	CheckpointReads int64 `json:"checkpoint_reads"`
	MemoryBytes     int64 `json:"memory_bytes"` // memory backend: keys and values; bbolt: write-back caches; plus the window store's object cache and timer front
	Windows         int64 `json:"windows"`      // open windows (panes, for sliding windows in panes)
	Timers          int64 `json:"timers"`       // pending timers
}

// CheckpointReport is GET /api/checkpoints.
type CheckpointReport struct {
	IntervalMs        int64 `json:"interval_ms"`
	Retain            int   `json:"retain"`
	TolerableFailures int   `json:"tolerable_failures"`
	// Completed and Failed count since start (Failed includes aborted
	// savepoints). ConsecutiveFailures counts aborted checkpoints since the
	// last completed one, savepoints left out, as the coordinator counts
	// them: the agent stops once it exceeds TolerableFailures.
	Completed           uint64 `json:"completed"`
	Failed              uint64 `json:"failed"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	LastCompletedID     uint64 `json:"last_completed_id"`
	LastTriggeredID     uint64 `json:"last_triggered_id"`
	LastDurationMs      int64  `json:"last_duration_ms"`
	LastSizeBytes       int64  `json:"last_size_bytes"`
	LastFullBytes       int64  `json:"last_full_size_bytes"`
	LastAlignmentMs     int64  `json:"last_alignment_ms"`
	// History holds the most recent checkpoints (at most 100), oldest first.
	History []CheckpointRecord `json:"history"`
}

// CheckpointRecord is one checkpoint in the history: a line of `eddy
// checkpoints ls` and of the status page.
type CheckpointRecord struct {
	ID          uint64 `json:"id"`
	Kind        string `json:"kind"`
	Time        string `json:"time"`
	SizeBytes   int64  `json:"size_bytes"`
	FullBytes   int64  `json:"full_bytes"`
	DurationMs  int64  `json:"duration_ms"`
	AlignmentMs int64  `json:"alignment_ms"`
	Files       int    `json:"files"`
	Aborted     string `json:"aborted,omitempty"`
	// DiskFull: aborted while the disk was full, not counted as a failure.
	DiskFull bool `json:"disk_full,omitempty"`
	// UnalignedTasks took the barrier ahead of their queues, storing
	// InFlightRecords records it overtook.
	UnalignedTasks  int    `json:"unaligned_tasks,omitempty"`
	InFlightRecords uint64 `json:"inflight_records,omitempty"`
}

// AgentReport is GET /api/agent.
// Empty lists and a null upload mean "not configured".
type AgentReport struct {
	DeviceID string         `json:"device_id"`
	Sources  []SourceReport `json:"sources"`
	Ingest   []IngestReport `json:"ingest"`
	WAL      []WALReport    `json:"wal"`
	Upload   *UploadReport  `json:"upload"`
	// Disk is null until the agent has sampled its disk use.
	Disk *DiskReport `json:"disk"`
}

// Source kinds in SourceReport.Kind.
const (
	SourceKindMQTT      = "mqtt"
	SourceKindEmbedded  = "embedded" // an MQTT source on the embedded broker
	SourceKindFile      = "file"
	SourceKindSimulator = "simulator"
)

// SourceReport is one source in GET /api/agent.
type SourceReport struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Tracked tells whether the agent knows the connection state: only MQTT
	// sources on an outside broker report it (eddy_mqtt_connected).
	Tracked bool `json:"tracked"`
	// Connected is null when not tracked.
	Connected *bool `json:"connected"`
	// DisconnectedMs is how long the agent has seen the source disconnected
	// (sampled once a second), null when connected or not tracked.
	DisconnectedMs *int64 `json:"disconnected_ms"`
}

// WALReport is one exactly-once MQTT sink's write-ahead log in GET
// /api/agent. Each figure is null while the sink does not report it.
type WALReport struct {
	Sink         string `json:"sink"`
	MaxDiskBytes int64  `json:"max_disk_bytes"`
	WhenFull     string `json:"when_full"`
	// DiskBytes is the WAL's size on disk, which max_disk bounds.
	DiskBytes       *int64   `json:"disk_bytes"`
	BacklogBytes    *int64   `json:"backlog_bytes"`
	BacklogMessages *int64   `json:"backlog_messages"`
	OldestAgeS      *float64 `json:"oldest_age_s"`
	Connected       *bool    `json:"connected"`
	// Refusal is why the broker refuses the sink's session (a CONNACK
	// code's meaning, or QoS 2 refused), with what to do; "" when it does
	// not.
	Refusal string `json:"refusal,omitempty"`
}

// IngestReport is one source's ingest log in GET /api/agent.
type IngestReport struct {
	Source       string `json:"source"`
	SizeBytes    int64  `json:"size_bytes"`
	MaxDiskBytes int64  `json:"max_disk_bytes"`
	FirstOffset  uint64 `json:"first_offset"`
	LastOffset   uint64 `json:"last_offset"`
	// LagRecords counts readings logged but not yet handed to the
	// pipelines (eddy_ingest_lag_records).
	LagRecords uint64 `json:"lag_records"`
}

// UploadReport is the upload section of GET /api/agent: null without an
// upload block.
type UploadReport struct {
	Endpoint string `json:"endpoint"`
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix"`
	// BacklogCheckpoints are the completed checkpoints waiting for upload
	// (the one uploading included), BacklogFiles the objects they still
	// need in the bucket (files not known to be there, and a manifest
	// each), RecoveryPointLagMs how much a device replaced now from the
	// bucket would lose (eddy_upload_recovery_point_lag_seconds). All are
	// null until the uploader has started (it first checks the bucket, for
	// up to 10 s).
	BacklogCheckpoints *int64 `json:"backlog_checkpoints"`
	BacklogFiles       *int64 `json:"backlog_files"`
	RecoveryPointLagMs *int64 `json:"recovery_point_lag_ms"`
}

// DiskReport is the disk section of GET /api/agent: the eddy_disk_* gauges.
type DiskReport struct {
	BudgetBytes int64                `json:"budget_bytes"` // 0: unknown
	FreeBytes   int64                `json:"free_bytes"`
	Components  []DiskComponentUsage `json:"components"`
}

// DiskComponentUsage is one component's use of the disk.
type DiskComponentUsage struct {
	Component string `json:"component"`
	Bytes     int64  `json:"bytes"`
}

// Readiness is the body of /readyz (with the token; without it, only Ready).
type Readiness struct {
	Ready  bool    `json:"ready"`
	Checks []Check `json:"checks"`
}

// Check is one line of the readiness answer. Warning marks a problem that
// does not make the agent unready (an upload that keeps failing).
type Check struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Warning bool   `json:"warning,omitempty"`
	Detail  string `json:"detail"`
}
