package agent

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// introspection is the running agent as the admin endpoint sees it: it
// implements admin.Agent with read-only views of the agent, times how long
// sources stay disconnected, and registers the metrics derived from the
// agent's state. Everything it reads is fixed at build time or safe to read
// concurrently (metrics counters, atomics, the checkpointer's history under
// its lock, the pipelines under the agent's mu); the one thing it changes
// is by Savepoint.
type introspection struct {
	a *Agent
	// now is the wall clock (watermark lag, disconnection times); tests
	// replace it.
	now func() time.Time
	// maxDisconnected: see defaultMaxDisconnected.
	maxDisconnected time.Duration

	mu        sync.Mutex
	downSince map[string]time.Time // tracked source → first sample seen disconnected
}

func newIntrospection(a *Agent) *introspection {
	return &introspection{a: a, now: time.Now, maxDisconnected: defaultMaxDisconnected, downSince: map[string]time.Time{}}
}

var _ admin.Agent = (*introspection)(nil)

// DeviceID implements admin.Agent.
func (in *introspection) DeviceID() string { return in.a.deviceID }

// Pipelines implements admin.Agent: watermark lags are measured against
// the wall clock now.
func (in *introspection) Pipelines() []admin.PipelineReport {
	return in.pipelineReports(in.now().UnixMilli())
}

// Report implements admin.Agent. Empty lists are [], not null.
func (in *introspection) Report() admin.AgentReport {
	a := in.a
	return admin.AgentReport{DeviceID: a.deviceID, Sources: in.observeSources(), Ingest: nonNil(in.ingestReports()),
		WAL: nonNil(in.walReports()), Upload: in.uploadReport(), Disk: a.diskMeter.Load().Report()}
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// WriteMetrics implements admin.Agent: the agent's metrics, then the
// process's own figures (process_resident_memory_bytes,
// process_cpu_seconds_total, go_*): on a device nobody logs in to, the
// agent's footprint is only seen there.
func (in *introspection) WriteMetrics(w io.Writer) {
	in.a.metrics.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}

// Savepoint implements admin.Agent.
func (in *introspection) Savepoint(ctx context.Context) (uint64, error) {
	c := in.a.ckpt
	if c == nil {
		return 0, admin.ErrNotStarted
	}
	return c.Savepoint(ctx)
}

// registerMetrics adds the metrics derived from the agent's state: the
// admin endpoint serves them. GetOrCreate keeps it idempotent; the gauges
// read the agent when scraped, so there is no cost between scrapes.
func (in *introspection) registerMetrics() {
	a := in.a
	set := a.metrics
	for _, p := range a.flow.pipelines {
		l := fmt.Sprintf(`{pipeline=%q}`, p.name)
		if p.eventTime {
			set.GetOrCreateGauge("eddy_watermark_lag_ms"+l, func() float64 {
				if wm := p.m.watermark.Load(); wm != -1<<63 {
					return float64(in.now().UnixMilli() - wm)
				}
				return 0
			})
		}
		hasLate := p.late != nil
		set.GetOrCreateGauge("eddy_readings_dropped_total"+l, func() float64 {
			n := p.m.unassigned.Get()
			if !hasLate {
				n += p.m.lateTotal()
			}
			return float64(n)
		})
		set.GetOrCreateGauge(fmt.Sprintf(`eddy_pipeline_parallelism{pipeline=%q}`, p.name), func() float64 {
			return float64(len(p.subtasks))
		})
		if p.shape != nil { // the subtasks keep state: a window, per-key functions
			pm := p.m // kept across region restarts, unlike p
			for name, field := range map[string]func(*admin.StateReport) int64{
				"eddy_state_keys":         func(r *admin.StateReport) int64 { return r.Keys },
				"eddy_state_file_bytes":   func(r *admin.StateReport) int64 { return r.FileBytes },
				"eddy_state_memory_bytes": func(r *admin.StateReport) int64 { return r.MemoryBytes },
				"eddy_state_windows":      func(r *admin.StateReport) int64 { return r.Windows },
				"eddy_state_timers":       func(r *admin.StateReport) int64 { return r.Timers },
			} {
				set.GetOrCreateGauge(name+l, func() float64 {
					if r := pm.stateTotals(); r != nil {
						return float64(field(r))
					}
					return 0
				})
			}
		}
	}
	set.GetOrCreateGauge("eddy_checkpoint_consecutive_failures", func() float64 {
		rep, _ := in.Checkpoints()
		return float64(rep.ConsecutiveFailures)
	})
	set.GetOrCreateGauge("eddy_ready", func() float64 {
		if in.Readiness().Ready {
			return 1
		}
		return 0
	})
	set.GetOrCreateGauge("eddy_clock_synchronized", func() float64 {
		if a.clk.wallSynced() {
			return 1
		}
		return 0
	})
}

// PipelineStatus reports each pipeline's counters.
func (a *Agent) PipelineStatus() []admin.PipelineStatus {
	a.flow.mu.Lock()
	defer a.flow.mu.Unlock()
	var out []admin.PipelineStatus
	for _, p := range a.flow.pipelines {
		st := admin.PipelineStatus{Name: p.name, ReadingsIn: p.m.in.Get(), ResultsOut: p.m.out.Get(),
			Filtered: p.m.filtered.Get(), Late: p.m.lateTotal(), Unassigned: p.m.unassigned.Get(),
			DeadLettered: p.m.deadLetteredTotal(), Parallelism: len(p.subtasks)}
		if wm := p.m.watermark.Load(); wm != -1<<63 {
			st.WatermarkMs = &wm
		}
		out = append(out, st)
	}
	return out
}

// pipelineReports returns one report per pipeline, in configuration order,
// with watermark lags measured against wallMs.
func (in *introspection) pipelineReports(wallMs int64) []admin.PipelineReport {
	a := in.a
	base := a.PipelineStatus()
	a.flow.mu.Lock()
	defer a.flow.mu.Unlock()
	out := make([]admin.PipelineReport, 0, len(base))
	for i, st := range base {
		p := a.flow.pipelines[i]
		if p.name != st.Name {
			panic(fmt.Sprintf("agent: pipeline %d is %q in the status, %q in the agent", i, st.Name, p.name))
		}
		r := admin.PipelineReport{PipelineStatus: st, EventTime: p.eventTime, LateOutput: p.late != nil,
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

// Checkpoints implements admin.Agent: the checkpointer's statistics and
// history, or ok=false when checkpoints are not set up (before Run).
func (in *introspection) Checkpoints() (admin.CheckpointReport, bool) {
	a := in.a
	c := a.ckpt
	if c == nil {
		return admin.CheckpointReport{}, false
	}
	cc := a.cfg.Checkpoint
	h := c.History()
	st := c.Stats()
	return admin.CheckpointReport{
		IntervalMs: cc.Interval.Milliseconds(), Retain: cc.Retain, TolerableFailures: cc.TolerableFailures,
		Completed: st.Completed, Failed: st.Failed, ConsecutiveFailures: consecutiveFailures(h),
		LastCompletedID: st.LastCompletedID, LastTriggeredID: st.LastTriggeredID,
		LastDurationMs: st.LastDurationMs, LastSizeBytes: st.LastSizeBytes, LastFullBytes: st.LastFullBytes,
		LastAlignmentMs: st.LastAlignmentMs, History: h,
	}, true
}

// consecutiveFailures counts the aborted checkpoints at the end of history
// (oldest first), skipping savepoints, which the coordinator neither counts
// as failures nor lets reset the count. A history trimmed to its last 100
// records undercounts only past 100 failures in a row, far above any
// sensible tolerable_failures.
func consecutiveFailures(history []admin.CheckpointRecord) int {
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

// sourceReports lists the sources pipelines read, sorted by name. The
// connection state comes from the eddy_mqtt_connected gauge, which the
// source's connection callback sets.
func (in *introspection) sourceReports() []admin.SourceReport {
	a := in.a
	byName := map[string]*config.Source{}
	for _, s := range a.cfg.Sources {
		byName[s.Name] = s
	}
	var out []admin.SourceReport
	g := newGaugeReader(a.metrics)
	for _, name := range slices.Sorted(maps.Keys(a.flow.sources)) {
		r := admin.SourceReport{Name: name}
		switch s := byName[name]; {
		case s == nil:
			r.Kind = "unknown"
		case s.File != nil:
			r.Kind = admin.SourceKindFile
		case s.Simulator != nil:
			r.Kind = admin.SourceKindSimulator
		case s.MQTT != nil && s.MQTT.Broker == config.Embedded:
			r.Kind = admin.SourceKindEmbedded
		case s.MQTT != nil:
			r.Kind = admin.SourceKindMQTT
			r.Connected = g.bool(fmt.Sprintf(`eddy_mqtt_connected{source=%q}`, name))
			r.Tracked = r.Connected != nil
		}
		out = append(out, r)
	}
	return out
}

// walReports lists the WALs of the exactly-once MQTT sinks in
// configuration order; empty when there is none.
func (in *introspection) walReports() []admin.WALReport {
	a := in.a
	var out []admin.WALReport
	g := newGaugeReader(a.metrics)
	a.flow.mu.Lock()
	defer a.flow.mu.Unlock()
	for _, s := range a.cfg.Sinks {
		if s.MQTT == nil || !s.MQTT.UsesWAL() {
			continue
		}
		if _, used := a.flow.sinks[s.Name]; !used {
			continue
		}
		l := fmt.Sprintf(`{sink=%q}`, s.Name)
		r := admin.WALReport{Sink: s.Name, MaxDiskBytes: s.MQTT.Buffer.MaxDiskBytes, WhenFull: s.MQTT.Buffer.WhenFull,
			DiskBytes:       g.int("eddy_wal_disk_bytes" + l),
			BacklogBytes:    g.int("eddy_wal_backlog_bytes" + l),
			BacklogMessages: g.int("eddy_wal_backlog_messages" + l),
			Connected:       g.bool("eddy_wal_connected" + l),
		}
		if v, ok := g.value("eddy_wal_oldest_age_seconds" + l); ok {
			r.OldestAgeS = &v
		}
		if h := a.flow.walSinks[s.Name]; h != nil {
			if ws := h.s.Load(); ws != nil {
				r.Refusal = ws.Stats().Refusal
			}
		}
		out = append(out, r)
	}
	return out
}

// ingestReports lists the ingest logs (sources that cannot replay), sorted
// by source name. Log methods are safe for concurrent use.
func (in *introspection) ingestReports() []admin.IngestReport {
	a := in.a
	var out []admin.IngestReport
	for _, name := range slices.Sorted(maps.Keys(a.flow.sources)) {
		s := a.flow.sources[name]
		l := s.ilog
		if l == nil {
			continue
		}
		out = append(out, admin.IngestReport{Source: name, SizeBytes: l.SizeBytes(), MaxDiskBytes: a.cfg.Ingest.MaxDiskBytes,
			FirstOffset: l.FirstOffset(), LastOffset: l.LastOffset(), LagRecords: s.ingestLag()})
	}
	return out
}

// gaugeReader reads gauges by name without creating them, so the reports can
// include what other parts register (eddy_mqtt_connected, eddy_wal_*)
// without depending on their types. It lists the registered names once.
// Safe inside a gauge callback: the metric set calls those unlocked.
type gaugeReader struct {
	set   *metrics.Set
	names map[string]bool
}

func newGaugeReader(set *metrics.Set) gaugeReader {
	names := map[string]bool{}
	for _, n := range set.ListMetricNames() {
		names[n] = true
	}
	return gaugeReader{set: set, names: names}
}

// value returns the gauge's value; ok is false when nothing registered it.
func (g gaugeReader) value(name string) (float64, bool) {
	if !g.names[name] {
		return 0, false
	}
	return g.set.GetOrCreateGauge(name, nil).Get(), true
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

func (in *introspection) uploadReport() *admin.UploadReport {
	a := in.a
	u := a.cfg.Upload
	if u == nil {
		return nil
	}
	r := &admin.UploadReport{Endpoint: u.Endpoint, Bucket: u.Bucket, Prefix: config.Expand(u.Prefix, a.flow.vars())}
	if st := a.upload.Stats(); st != nil {
		// What /readyz's upload check reports, as numbers.
		checkpoints, files, lag := int64(st.Pending), int64(st.PendingObjects), st.RecoveryPointLag.Milliseconds()
		r.BacklogCheckpoints, r.BacklogFiles, r.RecoveryPointLagMs = &checkpoints, &files, &lag
	}
	return r
}
