package introspect

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/upload"
)

// running is a Running of fixed values.
type running struct {
	ingest      []admin.IngestReport
	upload      *upload.Stats
	checkpoints *admin.CheckpointReport // nil: not set up
	diskFull    string
	limits      []RestartLimit
}

func (r *running) Ingest() []admin.IngestReport { return r.ingest }
func (r *running) WALRefusal(string) string     { return "" }
func (r *running) UploadStats() *upload.Stats   { return r.upload }
func (r *running) Disk() *admin.DiskReport      { return nil }
func (r *running) Checkpoints() (admin.CheckpointReport, bool) {
	if r.checkpoints == nil {
		return admin.CheckpointReport{}, false
	}
	return *r.checkpoints, true
}
func (r *running) DiskFull() string              { return r.diskFull }
func (r *running) RestartLimits() []RestartLimit { return r.limits }
func (r *running) ClockSynchronized() bool       { return true }
func (r *running) Savepoint(context.Context) (uint64, error) {
	return 0, admin.ErrNotStarted
}

// counters are a pipeline's counters of fixed values.
type counters struct{ st admin.PipelineStatus }

func (c counters) Status() admin.PipelineStatus            { return c.st }
func (c counters) DeadLetteredByReason() map[string]uint64 { return map[string]uint64{} }
func (c counters) State() *admin.StateReport               { return nil }

// newView is a view of one MQTT source "s" on an outside broker whose
// eddy_mqtt_connected gauge reads connected, with its clock at *now.
func newView(s Setup, r Running, connected *atomic.Bool, now *time.Time) *View {
	if s.Metrics == nil {
		s.Metrics = metrics.NewSet()
	}
	s.Sources = append(s.Sources, &config.Source{Name: "s", MQTT: &config.MQTTSource{Broker: "tcp://broker:1883"}})
	s.Metrics.NewGauge(`eddy_mqtt_connected{source="s"}`, func() float64 {
		if connected.Load() {
			return 1
		}
		return 0
	})
	v := New(s, r)
	v.Now = func() time.Time { return *now }
	return v
}

// TestView_Disconnection: a source is timed from the first sample that
// sees it down; readiness fails at MaxDisconnected and recovers, with the
// timing reset, once the source is back.
func TestView_Disconnection(t *testing.T) {
	var connected atomic.Bool
	now := time.UnixMilli(1_700_000_000_000)
	v := newView(Setup{}, &running{}, &connected, &now)
	v.MaxDisconnected = time.Minute

	rep := v.Report()
	if len(rep.Sources) != 1 || !rep.Sources[0].Tracked || *rep.Sources[0].DisconnectedMs != 0 {
		t.Fatalf("first sample: %+v", rep.Sources)
	}
	now = now.Add(time.Minute - time.Millisecond)
	if rd := v.Readiness(); !rd.Ready {
		t.Fatalf("down for less than MaxDisconnected: %+v", rd)
	}
	now = now.Add(time.Millisecond)
	if rd := v.Readiness(); rd.Ready || rd.Checks[1].Name != "source/s" || rd.Checks[1].OK {
		t.Fatalf("down for MaxDisconnected: %+v", rd)
	}
	connected.Store(true)
	if rd := v.Readiness(); !rd.Ready {
		t.Fatalf("connected again: %+v", rd)
	}
	connected.Store(false)
	now = now.Add(time.Hour)
	if rep := v.Report(); *rep.Sources[0].DisconnectedMs != 0 {
		t.Fatalf("down again: timed from %d ms, want 0", *rep.Sources[0].DisconnectedMs)
	}
}

// TestView_Reports: the derived fields (dropped readings, watermark lag,
// consecutive failures), the upload backlog, empty lists as [], and the
// derived metrics.
func TestView_Reports(t *testing.T) {
	var connected atomic.Bool
	connected.Store(true)
	now := time.UnixMilli(1_700_000_000_000)
	wm := now.UnixMilli() - 2_500
	st := admin.PipelineStatus{ReadingsIn: 10, Late: 3, Unassigned: 2, WatermarkMs: &wm}
	r := &running{upload: &upload.Stats{Pending: 2, PendingObjects: 5},
		checkpoints: &admin.CheckpointReport{TolerableFailures: 2, History: []admin.CheckpointRecord{
			{ID: 1, Kind: "full"}, {ID: 2, Kind: "incremental", Aborted: "timed out"}, {ID: 3, Kind: "incremental", Aborted: "timed out"}}}}
	v := newView(Setup{DeviceID: "gw", Upload: &admin.UploadReport{Bucket: "eddy", Prefix: "gw/"}, Pipelines: []Pipeline{
		{Name: "kept", EventTime: true, LateOutput: true, Parallelism: 2, Counters: counters{st}},
		{Name: "dropped", EventTime: true, Parallelism: 1, Counters: counters{st}},
	}}, r, &connected, &now)

	ps := v.Pipelines()
	if len(ps) != 2 || ps[0].Name != "kept" || ps[0].Parallelism != 2 || ps[0].Dropped != 2 || ps[1].Dropped != 5 ||
		*ps[0].WatermarkLagMs != 2_500 {
		t.Errorf("pipelines = %+v", ps)
	}
	if rep, ok := v.Checkpoints(); !ok || rep.ConsecutiveFailures != 2 {
		t.Errorf("checkpoints = %+v, %v", rep, ok)
	}
	if rd := v.Readiness(); rd.Ready || rd.Checks[0].Name != "checkpoints" || rd.Checks[0].OK {
		t.Errorf("readiness with tolerable_failures failures in a row: %+v", rd)
	}

	b, err := json.Marshal(v.Report())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ingest":[]`, `"wal":[]`, `"backlog_checkpoints":2`, `"backlog_files":5`, `"prefix":"gw/"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %s: %s", want, b)
		}
	}
	if v.setup.Upload.BacklogFiles != nil {
		t.Error("the report changed the setup's upload destination")
	}

	v.RegisterMetrics()
	var w bytes.Buffer
	v.WriteMetrics(&w)
	for _, want := range []string{
		`eddy_watermark_lag_ms{pipeline="kept"} 2500`,
		`eddy_readings_dropped_total{pipeline="kept"} 2`,
		`eddy_readings_dropped_total{pipeline="dropped"} 5`,
		`eddy_pipeline_parallelism{pipeline="kept"} 2`,
		`eddy_checkpoint_consecutive_failures 2`,
		`eddy_ready 0`,
		`eddy_clock_synchronized 1`,
	} {
		if !strings.Contains(w.String(), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}
