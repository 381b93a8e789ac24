package agent

import (
	"fmt"
	"maps"
	"slices"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// Read-only views of a running agent for the admin API and the status page.
// Everything here reads fields fixed at build time or values that are safe
// to read concurrently (metrics counters, atomics, the checkpointer's
// history under its lock); nothing here changes the agent.

// pipelineReport is one element of GET /api/pipelines: pipelineStatus (the
// counters) plus what the admin derives from them.
type pipelineReport struct {
	pipelineStatus
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
}

// pipelineReports returns one report per pipeline, in configuration order,
// with watermark lags measured against wallMs.
func (a *Agent) pipelineReports(wallMs int64) []pipelineReport {
	base := a.PipelineStatus()
	out := make([]pipelineReport, 0, len(base))
	for i, st := range base {
		p := a.pipelines[i]
		if p.name != st.Name {
			panic(fmt.Sprintf("agent: pipeline %d is %q in the status, %q in the agent", i, st.Name, p.name))
		}
		r := pipelineReport{pipelineStatus: st, EventTime: p.eventTime, LateOutput: p.late != nil,
			DeadLetteredByReason: p.m.deadLetteredByReason()}
		r.Dropped = st.Unassigned
		if !r.LateOutput {
			r.Dropped += st.Late
		}
		if st.WatermarkMs != nil {
			lag := wallMs - *st.WatermarkMs
			r.WatermarkLagMs = &lag
		}
		out = append(out, r)
	}
	return out
}

// deadLetteredByReason returns a copy of the dead-letter counts by reason.
func (m *pipelineMetrics) deadLetteredByReason() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]uint64, len(m.dead))
	for reason, c := range m.dead {
		out[reason] = c.Get()
	}
	return out
}

// checkpointReport is GET /api/checkpoints.
type checkpointReport struct {
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
	History []checkpointRecord `json:"history"`
}

// checkpointReport returns the checkpointer's statistics and history, or
// ok=false when checkpoints are not set up (before Run).
func (a *Agent) checkpointReport() (checkpointReport, bool) {
	c := a.ckpt
	if c == nil {
		return checkpointReport{}, false
	}
	cc := a.cfg.Checkpoint
	h := c.History()
	return checkpointReport{
		IntervalMs: cc.Interval.Milliseconds(), Retain: cc.Retain, TolerableFailures: cc.TolerableFailures,
		Completed: c.mCompleted.Get(), Failed: c.mFailures.Get(), ConsecutiveFailures: consecutiveFailures(h),
		LastCompletedID: c.lastDone.Load(), LastTriggeredID: c.lastTrig.Load(),
		LastDurationMs: c.lastDurMs.Load(), LastSizeBytes: c.lastSize.Load(), LastFullBytes: c.lastFull.Load(),
		LastAlignmentMs: c.lastAlign.Load(), History: h,
	}, true
}

// consecutiveFailures counts the aborted checkpoints at the end of history
// (oldest first), skipping savepoints, which the coordinator neither counts
// as failures nor lets reset the count. A history trimmed to its last 100
// records undercounts only past 100 failures in a row, far above any
// sensible tolerable_failures.
func consecutiveFailures(history []checkpointRecord) int {
	n := 0
	for i := len(history) - 1; i >= 0; i-- {
		r := history[i]
		if r.Kind == checkpoint.KindSavepoint.String() {
			continue
		}
		if r.Aborted == "" {
			break
		}
		n++
	}
	return n
}

// Source kinds in sourceReport.Kind.
const (
	sourceKindMQTT      = "mqtt"
	sourceKindEmbedded  = "embedded" // an MQTT source on the embedded broker
	sourceKindFile      = "file"
	sourceKindSimulator = "simulator"
)

// sourceReport is one source in GET /api/agent.
type sourceReport struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Tracked tells whether the agent knows the connection state: only MQTT
	// sources on an outside broker report it (eddy_mqtt_connected).
	Tracked bool `json:"tracked"`
	// Connected is null when not tracked.
	Connected *bool `json:"connected"`
	// DisconnectedMs is how long the admin has seen the source disconnected
	// (sampled once a second), null when connected or not tracked.
	DisconnectedMs *int64 `json:"disconnected_ms"`
}

// sourceReports lists the sources pipelines read, sorted by name. The
// connection state comes from the eddy_mqtt_connected gauge, which the
// source's connection callback sets.
func (a *Agent) sourceReports() []sourceReport {
	byName := map[string]*config.Source{}
	for _, s := range a.cfg.Sources {
		byName[s.Name] = s
	}
	var out []sourceReport
	for _, name := range slices.Sorted(maps.Keys(a.sources)) {
		r := sourceReport{Name: name}
		switch s := byName[name]; {
		case s == nil:
			r.Kind = "unknown"
		case s.File != nil:
			r.Kind = sourceKindFile
		case s.Simulator != nil:
			r.Kind = sourceKindSimulator
		case s.MQTT != nil && s.MQTT.Broker == config.Embedded:
			r.Kind = sourceKindEmbedded
		case s.MQTT != nil:
			r.Kind = sourceKindMQTT
			r.Tracked = true
			// The gauge exists: source() created it with the runner.
			up := a.metrics.GetOrCreateGauge(fmt.Sprintf(`eddy_mqtt_connected{source=%q}`, name), nil).Get() == 1
			r.Connected = &up
		}
		out = append(out, r)
	}
	return out
}

// walReport is the WAL section of GET /api/agent: null when no sink needs a
// WAL (no MQTT sink with delivery = "exactly_once").
type walReport struct {
	Sinks        []string `json:"sinks"`
	MaxDiskBytes int64    `json:"max_disk_bytes"`
	// BacklogBytes is null while the WAL sink does not report it.
	BacklogBytes *int64 `json:"backlog_bytes"`
}

func (a *Agent) walReport() *walReport {
	var r *walReport
	for _, s := range a.cfg.Sinks {
		if s.MQTT == nil || s.MQTT.Delivery != config.ExactlyOnce {
			continue
		}
		if r == nil {
			r = &walReport{}
		}
		r.Sinks = append(r.Sinks, s.Name)
		r.MaxDiskBytes += s.MQTT.Buffer.MaxDiskBytes
	}
	return r
}

// uploadReport is the upload section of GET /api/agent: null without an
// upload block.
type uploadReport struct {
	Endpoint string `json:"endpoint"`
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix"`
	// BacklogFiles and RecoveryPointLagMs are null while the uploader does
	// not report them.
	BacklogFiles       *int64 `json:"backlog_files"`
	RecoveryPointLagMs *int64 `json:"recovery_point_lag_ms"`
}

func (a *Agent) uploadReport() *uploadReport {
	u := a.cfg.Upload
	if u == nil {
		return nil
	}
	return &uploadReport{Endpoint: u.Endpoint, Bucket: u.Bucket, Prefix: config.Expand(u.Prefix, a.vars())}
}
