package agent

import (
	"context"
	"maps"
	"slices"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/agent/introspect"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/upload"
)

// newIntrospection is the view of a the admin endpoint serves: what build
// fixed, as plain values, and a's live state through introspection. Called
// once build has added every pipeline, source and sink.
func newIntrospection(a *Agent) *introspect.View {
	return introspect.New(introspectSetup(a), introspection{a})
}

// introspectSetup is what build fixed of a, as the view takes it.
func introspectSetup(a *Agent) introspect.Setup {
	s := introspect.Setup{DeviceID: a.deviceID, Metrics: a.metrics}
	for _, p := range a.flow.pipelines {
		s.Pipelines = append(s.Pipelines, introspect.Pipeline{Name: p.Name(), EventTime: p.EventTime(), LateOutput: p.Config().LateOutput != nil,
			Stateful: p.Stateful(), Parallelism: p.Parallelism(), Counters: a.flow.pipeMetrics[p.Name()]})
	}
	for _, src := range a.cfg.Sources {
		if _, used := a.flow.sources[src.Name]; used {
			s.Sources = append(s.Sources, src)
		}
	}
	for _, sk := range a.cfg.Sinks {
		if _, used := a.flow.sinks[sk.Name]; used {
			s.Sinks = append(s.Sinks, sk)
		}
	}
	if u := a.cfg.Upload; u != nil {
		s.Upload = &admin.UploadReport{Endpoint: u.Endpoint, Bucket: u.Bucket, Prefix: config.Expand(u.Prefix, a.flow.vars())}
	}
	return s
}

// introspection reads the running agent for the view (introspect.Running).
type introspection struct{ a *Agent }

// Ingest: Log methods are safe for concurrent use; the sources are fixed
// at build.
func (in introspection) Ingest() []admin.IngestReport {
	a := in.a
	var out []admin.IngestReport
	for _, name := range slices.Sorted(maps.Keys(a.flow.sources)) {
		s := a.flow.sources[name]
		if l := s.ilog; l != nil {
			out = append(out, admin.IngestReport{Source: name, SizeBytes: l.SizeBytes(), MaxDiskBytes: a.cfg.Ingest.MaxDiskBytes,
				FirstOffset: l.FirstOffset(), LastOffset: l.LastOffset(), LagRecords: s.ingestLag()})
		}
	}
	return out
}

func (in introspection) WALRefusal(sink string) string {
	in.a.flow.mu.Lock()
	h := in.a.flow.walSinks[sink]
	in.a.flow.mu.Unlock()
	if h != nil {
		if ws := h.s.Load(); ws != nil {
			return ws.Stats().Refusal
		}
	}
	return ""
}

func (in introspection) UploadStats() *upload.Stats { return in.a.upload.Stats() }

func (in introspection) Disk() *admin.DiskReport { return in.a.diskMeter.Load().Report() }

func (in introspection) Checkpoints() (admin.CheckpointReport, bool) {
	c := in.a.ckpt
	if c == nil {
		return admin.CheckpointReport{}, false
	}
	cc := in.a.cfg.Checkpoint
	st := c.Stats()
	return admin.CheckpointReport{
		IntervalMs: cc.Interval.Milliseconds(), Retain: cc.Retain, TolerableFailures: cc.TolerableFailures,
		Completed: st.Completed, Failed: st.Failed,
		LastCompletedID: st.LastCompletedID, LastTriggeredID: st.LastTriggeredID,
		LastDurationMs: st.LastDurationMs, LastSizeBytes: st.LastSizeBytes, LastFullBytes: st.LastFullBytes,
		LastAlignmentMs: st.LastAlignmentMs, History: c.History(),
	}, true
}

// DiskFull: the checkpoint store's own full-disk state (none before
// checkpoints are set up), then what else waits for disk space.
func (in introspection) DiskFull() string {
	var ckpt string
	if c := in.a.ckpt; c != nil {
		ckpt = c.DiskFullReason()
	}
	return in.a.diskHolds.Detail(ckpt)
}

func (in introspection) RestartLimits() []introspect.RestartLimit {
	var out []introspect.RestartLimit
	for _, l := range in.a.failover.Limits() {
		out = append(out, introspect.RestartLimit{Pipelines: l.Pipelines, Detail: l.Detail()})
	}
	in.a.flow.mu.Lock()
	defer in.a.flow.mu.Unlock()
	for _, v := range in.a.flow.keptPrevious {
		out = append(out, introspect.RestartLimit{Pipelines: v.Pipeline, Check: "config/" + v.Pipeline,
			Detail: "runs its previous definition: " + v.Why})
	}
	return out
}

func (in introspection) ClockSynchronized() bool { return in.a.clk.WallSynced() }

func (in introspection) Savepoint(ctx context.Context) (uint64, error) {
	c := in.a.ckpt
	if c == nil {
		return 0, admin.ErrNotStarted
	}
	return c.Savepoint(ctx)
}
