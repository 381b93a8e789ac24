package stages

import (
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// TestMetrics_Status: the counters the stages add to are what Status and
// DeadLetteredByReason report (the admin endpoint's /api/pipelines); no
// watermark is reported before the first.
func TestMetrics_Status(t *testing.T) {
	m := NewMetrics(metrics.NewSet(), "temps")
	if st := m.Status(); st.WatermarkMs != nil || st.ReadingsIn != 0 {
		t.Fatalf("before any reading: %+v", st)
	}
	m.watermark.Store(1_700_000_000_000)
	m.in.Add(10)
	m.late.Add(2)
	m.lateResumed.Add(1)
	m.unassigned.Add(2)
	m.deadLettered("bad_json").Add(4)
	st := m.Status()
	if st.ReadingsIn != 10 || st.Late != 3 || st.Unassigned != 2 || st.DeadLettered != 4 ||
		st.WatermarkMs == nil || *st.WatermarkMs != 1_700_000_000_000 {
		t.Fatalf("status %+v", st)
	}
	if r := m.DeadLetteredByReason(); len(r) != 1 || r["bad_json"] != 4 {
		t.Fatalf("dead-lettered by reason %v", r)
	}
	if m.State() != nil {
		t.Fatal("state of a pipeline without state")
	}
}
