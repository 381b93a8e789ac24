package introspect

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/upload"
)

func TestEvaluateReadiness(t *testing.T) {
	up, down := true, false
	ms := func(v int64) *int64 { return &v }
	src := func(connected bool, downMs int64) admin.SourceReport {
		s := admin.SourceReport{Name: "s", Kind: admin.SourceKindMQTT, Tracked: true, Connected: &up}
		if !connected {
			s.Connected, s.DisconnectedMs = &down, ms(downMs)
		}
		return s
	}
	tests := []struct {
		name   string
		in     readinessInput
		ready  bool
		failed string // the failing check, if any
	}{
		{"fresh", readinessInput{checkpoints: true, tolerableFailures: 3}, true, ""},
		{"not started", readinessInput{}, true, ""},
		{"failures below tolerable", readinessInput{checkpoints: true, consecutiveFails: 2, tolerableFailures: 3}, true, ""},
		{"failures at tolerable", readinessInput{checkpoints: true, consecutiveFails: 3, tolerableFailures: 3}, false, "checkpoints"},
		{"tolerable zero, no failure", readinessInput{checkpoints: true}, true, ""},
		{"tolerable zero, one failure", readinessInput{checkpoints: true, consecutiveFails: 1}, false, "checkpoints"},
		{"disk full", readinessInput{checkpoints: true, tolerableFailures: 3, diskFull: "write: no space left on device"}, false, "disk"},
		{"source connected", readinessInput{sources: []admin.SourceReport{src(true, 0)}, maxDisconnectedMs: 1000}, true, ""},
		{"source down briefly", readinessInput{sources: []admin.SourceReport{src(false, 999)}, maxDisconnectedMs: 1000}, true, ""},
		{"source down too long", readinessInput{sources: []admin.SourceReport{src(false, 1000)}, maxDisconnectedMs: 1000}, false, "source/s"},
		{"untracked source", readinessInput{sources: []admin.SourceReport{{Name: "f", Kind: admin.SourceKindFile}}}, true, ""},
		{"ingest log below full", readinessInput{ingest: []admin.IngestReport{{Source: "s", SizeBytes: 94, MaxDiskBytes: 100}}}, true, ""},
		{"ingest log full", readinessInput{ingest: []admin.IngestReport{{Source: "s", SizeBytes: 95, MaxDiskBytes: 100}}}, false, "ingest/s"},
		{"wal size not reported", readinessInput{wal: []admin.WALReport{{Sink: "w", MaxDiskBytes: 100}}}, true, ""},
		{"wal full", readinessInput{wal: []admin.WALReport{{Sink: "w", MaxDiskBytes: 100, DiskBytes: ms(100), WhenFull: "block"}}}, false, "wal/w"},
		{"wal refused by the broker", readinessInput{wal: []admin.WALReport{{Sink: "w", MaxDiskBytes: 100, DiskBytes: ms(1), Refusal: "walsink: the broker does not accept QoS 2"}}}, false, "wal/w"},
		{"upload failing: a warning, still ready", readinessInput{upload: &upload.Stats{Pending: 3, LastError: "upload: S3 rejected the credentials"}}, true, ""},
		{"upload fine", readinessInput{upload: &upload.Stats{Pending: 1}}, true, ""},
		{"restart limit reached", readinessInput{checkpoints: true, tolerableFailures: 3,
			restartLimits: []RestartLimit{{Pipelines: "p", Detail: "pipelines p: restart limit reached: 2 restarts in 1s (strategy fixed_delay); last error: state store full"}}}, false, "restarts/p"},
		{"a change that cannot roll over: the previous definition runs", readinessInput{checkpoints: true, tolerableFailures: 3,
			restartLimits: []RestartLimit{{Pipelines: "p", Check: "config/p", Detail: "runs its previous definition: window changed (size 10s → 20s), which cannot roll over"}}}, false, "config/p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := evaluateReadiness(tt.in)
			if r.Ready != tt.ready {
				t.Errorf("ready = %v, want %v: %+v", r.Ready, tt.ready, r.Checks)
			}
			var failed []string
			for _, c := range r.Checks {
				if !c.OK {
					failed = append(failed, c.Name)
				}
			}
			if got := strings.Join(failed, ","); got != tt.failed {
				t.Errorf("failed checks %q, want %q", got, tt.failed)
			}
		})
	}
}

func TestConsecutiveFailures(t *testing.T) {
	ok := admin.CheckpointRecord{Kind: "full"}
	bad := admin.CheckpointRecord{Kind: "incremental", Aborted: "checkpoint: timed out"}
	spOK := admin.CheckpointRecord{Kind: "savepoint"}
	spBad := admin.CheckpointRecord{Kind: "savepoint", Aborted: "x"}
	noSpace := admin.CheckpointRecord{Kind: "incremental", Aborted: "no space left on device", DiskFull: true}
	tests := []struct {
		name string
		h    []admin.CheckpointRecord
		want int
	}{
		{"empty", nil, 0},
		{"all completed", []admin.CheckpointRecord{ok, ok}, 0},
		{"trailing failures", []admin.CheckpointRecord{bad, ok, bad, bad}, 2},
		{"completed resets", []admin.CheckpointRecord{bad, bad, ok}, 0},
		// The coordinator neither counts savepoints nor lets one reset.
		{"savepoints skipped", []admin.CheckpointRecord{bad, spOK, bad, spBad}, 2},
		// Nor failures while the disk was full.
		{"disk full skipped", []admin.CheckpointRecord{bad, noSpace, noSpace, bad}, 2},
	}
	for _, tt := range tests {
		if got := consecutiveFailures(tt.h); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}
