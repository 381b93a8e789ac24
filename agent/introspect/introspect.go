package introspect

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
)

// View is the running agent as the admin endpoint sees it: it implements
// admin.Agent from its Setup and Running, times how long sources stay
// disconnected, and registers the metrics derived from the agent's state.
// It changes nothing in the agent but by Savepoint (and the gauges
// RegisterMetrics adds).
type View struct {
	// Now is the wall clock (watermark lag, disconnection times). Tests
	// replace it before serving.
	Now func() time.Time
	// MaxDisconnected is how long an MQTT source on an outside broker may
	// stay disconnected before the agent reports not ready; it starts at
	// DefaultMaxDisconnected.
	MaxDisconnected time.Duration

	setup Setup
	run   Running

	mu        sync.Mutex
	downSince map[string]time.Time // tracked source → first sample seen disconnected
}

// New returns the view of the agent set up as s and running as r.
func New(s Setup, r Running) *View {
	return &View{Now: time.Now, MaxDisconnected: DefaultMaxDisconnected, setup: s, run: r, downSince: map[string]time.Time{}}
}

var _ admin.Agent = (*View)(nil)

// Listen registers the derived metrics, serves the admin endpoint with opts
// and times source disconnections; stop ends both.
func (v *View) Listen(opts admin.Options) (srv *admin.Server, stop func(), err error) {
	v.RegisterMetrics()
	srv, err = admin.Listen(v, opts)
	if err != nil {
		return nil, nil, err
	}
	ctx, stopSampling := context.WithCancel(context.Background())
	go v.sampleSources(ctx)
	return srv, func() { stopSampling(); srv.Close() }, nil
}

// DeviceID implements admin.Agent.
func (v *View) DeviceID() string { return v.setup.DeviceID }

// Pipelines implements admin.Agent: watermark lags are measured against
// the wall clock now.
func (v *View) Pipelines() []admin.PipelineReport {
	return v.pipelineReports(v.Now().UnixMilli())
}

// Report implements admin.Agent. Empty lists are [], not null.
func (v *View) Report() admin.AgentReport {
	return admin.AgentReport{DeviceID: v.setup.DeviceID, Sources: v.observeSources(), Ingest: nonNil(v.run.Ingest()),
		WAL: nonNil(v.walReports()), Upload: v.uploadReport(), Disk: v.run.Disk()}
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
func (v *View) WriteMetrics(w io.Writer) {
	v.setup.Metrics.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}

// Savepoint implements admin.Agent.
func (v *View) Savepoint(ctx context.Context) (uint64, error) { return v.run.Savepoint(ctx) }

// RegisterMetrics adds the metrics derived from the agent's state to the
// metric set: the admin endpoint serves them. GetOrCreate keeps it
// idempotent; the gauges read the agent when scraped, so there is no cost
// between scrapes.
func (v *View) RegisterMetrics() {
	set := v.setup.Metrics
	for _, p := range v.setup.Pipelines {
		l := fmt.Sprintf(`{pipeline=%q}`, p.Name)
		if p.EventTime {
			set.GetOrCreateGauge("eddy_watermark_lag_ms"+l, func() float64 {
				if wm := p.Counters.Status().WatermarkMs; wm != nil {
					return float64(v.Now().UnixMilli() - *wm)
				}
				return 0
			})
		}
		set.GetOrCreateGauge("eddy_readings_dropped_total"+l, func() float64 {
			return float64(dropped(p.Counters.Status(), p.LateOutput))
		})
		set.GetOrCreateGauge(fmt.Sprintf(`eddy_pipeline_parallelism{pipeline=%q}`, p.Name), func() float64 {
			return float64(p.Parallelism)
		})
		if p.Stateful {
			for name, field := range map[string]func(*admin.StateReport) int64{
				"eddy_state_keys":               func(r *admin.StateReport) int64 { return r.Keys },
				"eddy_state_file_bytes":         func(r *admin.StateReport) int64 { return r.FileBytes },
				"eddy_state_file_written_bytes": func(r *admin.StateReport) int64 { return r.FileWrittenBytes },
				"eddy_state_checkpoint_reads":   func(r *admin.StateReport) int64 { return r.CheckpointReads },
				"eddy_state_memory_bytes":       func(r *admin.StateReport) int64 { return r.MemoryBytes },
				"eddy_state_windows":            func(r *admin.StateReport) int64 { return r.Windows },
				"eddy_state_timers":             func(r *admin.StateReport) int64 { return r.Timers },
			} {
				set.GetOrCreateGauge(name+l, func() float64 {
					if r := p.Counters.State(); r != nil {
						return float64(field(r))
					}
					return 0
				})
			}
		}
	}
	set.GetOrCreateGauge("eddy_checkpoint_consecutive_failures", func() float64 {
		rep, _ := v.Checkpoints()
		return float64(rep.ConsecutiveFailures)
	})
	set.GetOrCreateGauge("eddy_ready", func() float64 {
		if v.Readiness().Ready {
			return 1
		}
		return 0
	})
	set.GetOrCreateGauge("eddy_clock_synchronized", func() float64 {
		if v.run.ClockSynchronized() {
			return 1
		}
		return 0
	})
}

// dropped is what a pipeline lost: readings no window took, and late ones
// unless late_output keeps them.
func dropped(st admin.PipelineStatus, lateOutput bool) uint64 {
	n := st.Unassigned
	if !lateOutput {
		n += st.Late
	}
	return n
}

// pipelineReports returns one report per pipeline, in configuration order,
// with watermark lags measured against wallMs.
func (v *View) pipelineReports(wallMs int64) []admin.PipelineReport {
	out := make([]admin.PipelineReport, 0, len(v.setup.Pipelines))
	for _, p := range v.setup.Pipelines {
		st := p.Counters.Status()
		st.Name, st.Parallelism = p.Name, p.Parallelism
		r := admin.PipelineReport{PipelineStatus: st, EventTime: p.EventTime, LateOutput: p.LateOutput,
			DeadLetteredByReason: p.Counters.DeadLetteredByReason(), State: p.Counters.State(),
			Dropped: dropped(st, p.LateOutput)}
		if st.WatermarkMs != nil {
			lag := wallMs - *st.WatermarkMs
			r.WatermarkLagMs = &lag
		}
		out = append(out, r)
	}
	return out
}

// Checkpoints implements admin.Agent: the checkpointer's statistics and
// history, or ok=false when checkpoints are not set up (before Run).
func (v *View) Checkpoints() (admin.CheckpointReport, bool) {
	rep, ok := v.run.Checkpoints()
	if !ok {
		return admin.CheckpointReport{}, false
	}
	rep.ConsecutiveFailures = consecutiveFailures(rep.History)
	return rep, true
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
func (v *View) sourceReports() []admin.SourceReport {
	srcs := slices.SortedFunc(slices.Values(v.setup.Sources), func(a, b *config.Source) int { return cmp.Compare(a.Name, b.Name) })
	var out []admin.SourceReport
	g := newGaugeReader(v.setup.Metrics)
	for _, s := range srcs {
		r := admin.SourceReport{Name: s.Name}
		switch {
		case s.File != nil:
			r.Kind = admin.SourceKindFile
		case s.Simulator != nil:
			r.Kind = admin.SourceKindSimulator
		case s.MQTT != nil && s.MQTT.Broker == config.Embedded:
			r.Kind = admin.SourceKindEmbedded
		case s.MQTT != nil:
			r.Kind = admin.SourceKindMQTT
			r.Connected = g.bool(fmt.Sprintf(`eddy_mqtt_connected{source=%q}`, s.Name))
			r.Tracked = r.Connected != nil
		}
		out = append(out, r)
	}
	return out
}

// walReports lists the WALs of the exactly-once MQTT sinks in
// configuration order; empty when there is none.
func (v *View) walReports() []admin.WALReport {
	var out []admin.WALReport
	g := newGaugeReader(v.setup.Metrics)
	for _, s := range v.setup.Sinks {
		if s.MQTT == nil || !s.MQTT.UsesWAL() {
			continue
		}
		l := fmt.Sprintf(`{sink=%q}`, s.Name)
		r := admin.WALReport{Sink: s.Name, MaxDiskBytes: s.MQTT.Buffer.MaxDiskBytes, WhenFull: s.MQTT.Buffer.WhenFull,
			DiskBytes:       g.int("eddy_wal_disk_bytes" + l),
			BacklogBytes:    g.int("eddy_wal_backlog_bytes" + l),
			BacklogMessages: g.int("eddy_wal_backlog_messages" + l),
			Connected:       g.bool("eddy_wal_connected" + l),
			Refusal:         v.run.WALRefusal(s.Name),
		}
		if age, ok := g.value("eddy_wal_oldest_age_seconds" + l); ok {
			r.OldestAgeS = &age
		}
		out = append(out, r)
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

// uploadReport is the upload block's destination with the uploader's
// backlog; nil without an upload block.
func (v *View) uploadReport() *admin.UploadReport {
	if v.setup.Upload == nil {
		return nil
	}
	r := *v.setup.Upload
	if st := v.run.UploadStats(); st != nil {
		// What /readyz's upload check reports, as numbers.
		checkpoints, files, lag := int64(st.Pending), int64(st.PendingObjects), st.RecoveryPointLag.Milliseconds()
		r.BacklogCheckpoints, r.BacklogFiles, r.RecoveryPointLagMs = &checkpoints, &files, &lag
	}
	return &r
}
