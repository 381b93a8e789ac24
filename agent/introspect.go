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

// pipelineStatus is a pipeline's counters (Agent.PipelineStatus).
type pipelineStatus struct {
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
	// State is what the pipeline's state stores held at the last
	// checkpoint; null for a pipeline without a window.
	State *stateReport `json:"state"`
}

// pipelineReports returns one report per pipeline, in configuration order,
// with watermark lags measured against wallMs.
func (a *Agent) pipelineReports(wallMs int64) []pipelineReport {
	base := a.PipelineStatus()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]pipelineReport, 0, len(base))
	for i, st := range base {
		p := a.pipelines[i]
		if p.name != st.Name {
			panic(fmt.Sprintf("agent: pipeline %d is %q in the status, %q in the agent", i, st.Name, p.name))
		}
		r := pipelineReport{pipelineStatus: st, EventTime: p.eventTime, LateOutput: p.late != nil,
			DeadLetteredByReason: p.m.deadLetteredByReason(), State: p.m.stateTotals()}
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
		if r.Kind == checkpoint.KindSavepoint.String() || r.DiskFull {
			continue // neither counts towards tolerable_failures
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
	g := a.gaugeReader()
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
			r.Connected = g.bool(fmt.Sprintf(`eddy_mqtt_connected{source=%q}`, name))
			r.Tracked = r.Connected != nil
		}
		out = append(out, r)
	}
	return out
}

// walReport is one exactly-once MQTT sink's write-ahead log in GET
// /api/agent. The figures come from the eddy_wal_* gauges the WAL sink
// registers; each is null while the sink does not report it.
type walReport struct {
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

// walReports lists the WALs of the exactly-once MQTT sinks in
// configuration order; empty when there is none.
func (a *Agent) walReports() []walReport {
	var out []walReport
	g := a.gaugeReader()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.cfg.Sinks {
		if s.MQTT == nil || !s.MQTT.UsesWAL() {
			continue
		}
		if _, used := a.sinks[s.Name]; !used {
			continue
		}
		l := fmt.Sprintf(`{sink=%q}`, s.Name)
		r := walReport{Sink: s.Name, MaxDiskBytes: s.MQTT.Buffer.MaxDiskBytes, WhenFull: s.MQTT.Buffer.WhenFull,
			DiskBytes:       g.int("eddy_wal_disk_bytes" + l),
			BacklogBytes:    g.int("eddy_wal_backlog_bytes" + l),
			BacklogMessages: g.int("eddy_wal_backlog_messages" + l),
			Connected:       g.bool("eddy_wal_connected" + l),
		}
		if v, ok := g.value("eddy_wal_oldest_age_seconds" + l); ok {
			r.OldestAgeS = &v
		}
		if h := a.walSinks[s.Name]; h != nil {
			if ws := h.s.Load(); ws != nil {
				r.Refusal = ws.Stats().Refusal
			}
		}
		out = append(out, r)
	}
	return out
}

// ingestReport is one source's ingest log in GET /api/agent.
type ingestReport struct {
	Source       string `json:"source"`
	SizeBytes    int64  `json:"size_bytes"`
	MaxDiskBytes int64  `json:"max_disk_bytes"`
	FirstOffset  uint64 `json:"first_offset"`
	LastOffset   uint64 `json:"last_offset"`
	// LagRecords counts readings logged but not yet handed to the
	// pipelines (eddy_ingest_lag_records).
	LagRecords uint64 `json:"lag_records"`
}

// ingestReports lists the ingest logs (sources that cannot replay), sorted
// by source name. Log methods are safe for concurrent use.
func (a *Agent) ingestReports() []ingestReport {
	var out []ingestReport
	for _, name := range slices.Sorted(maps.Keys(a.sources)) {
		s := a.sources[name]
		l := s.ilog
		if l == nil {
			continue
		}
		out = append(out, ingestReport{Source: name, SizeBytes: l.SizeBytes(), MaxDiskBytes: a.cfg.Ingest.MaxDiskBytes,
			FirstOffset: l.FirstOffset(), LastOffset: l.LastOffset(), LagRecords: s.ingestLag()})
	}
	return out
}

// gaugeReader reads gauges by name without creating them, so the admin can
// report what other parts register (eddy_mqtt_connected, eddy_wal_*)
// without depending on their types. It lists the registered names once.
// Safe inside a gauge callback: the metric set calls those unlocked.
type gaugeReader struct {
	a     *Agent
	names map[string]bool
}

func (a *Agent) gaugeReader() gaugeReader {
	names := map[string]bool{}
	for _, n := range a.metrics.ListMetricNames() {
		names[n] = true
	}
	return gaugeReader{a: a, names: names}
}

// value returns the gauge's value; ok is false when nothing registered it.
func (g gaugeReader) value(name string) (float64, bool) {
	if !g.names[name] {
		return 0, false
	}
	return g.a.metrics.GetOrCreateGauge(name, nil).Get(), true
}

func (g gaugeReader) int(name string) *int64 {
	v, ok := g.value(name)
	if !ok {
		return nil
	}
	n := int64(v)
	return &n
}

func (g gaugeReader) bool(name string) *bool {
	v, ok := g.value(name)
	if !ok {
		return nil
	}
	b := v == 1
	return &b
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
