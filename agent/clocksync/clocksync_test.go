package clocksync

import (
	"errors"
	"testing"
	"time"
)

// fakeSource reports synced and err, counting its reads.
type fakeSource struct {
	synced bool
	err    error
	reads  int
}

func (f *fakeSource) Synchronized() (bool, error) {
	f.reads++
	return f.synced, f.err
}

func TestCached(t *testing.T) {
	type step struct {
		atMs      int64
		srcSynced bool
		srcErr    error
		want      bool
		wantReads int
	}
	tests := []struct {
		name        string
		steps       []step
		wantChanges []bool
		wantErrors  int
	}{
		{
			name: "synchronised from the start: no change reported",
			steps: []step{
				{atMs: 0, srcSynced: true, want: true, wantReads: 1},
				{atMs: 999, srcSynced: true, want: true, wantReads: 1},
				{atMs: 1000, srcSynced: true, want: true, wantReads: 2},
			},
		},
		{
			name: "boots unsynchronised, then NTP synchronises",
			steps: []step{
				{atMs: 0, srcSynced: false, want: false, wantReads: 1},
				{atMs: 500, srcSynced: true, want: false, wantReads: 1}, // cached
				{atMs: 1000, srcSynced: true, want: true, wantReads: 2},
				{atMs: 5000, srcSynced: true, want: true, wantReads: 3},
			},
			wantChanges: []bool{false, true},
		},
		{
			name: "loses synchronisation",
			steps: []step{
				{atMs: 0, srcSynced: true, want: true, wantReads: 1},
				{atMs: 1000, srcSynced: false, want: false, wantReads: 2},
			},
			wantChanges: []bool{false},
		},
		{
			name: "a failed read counts as synchronised, reported once",
			steps: []step{
				{atMs: 0, srcErr: errors.New("EPERM"), want: true, wantReads: 1},
				{atMs: 1000, srcErr: errors.New("EPERM"), want: true, wantReads: 2},
			},
			wantErrors: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{}
			var changes []bool
			errs := 0
			c := NewCached(src, time.Second, func(s bool) { changes = append(changes, s) }, func(error) { errs++ })
			for _, s := range tt.steps {
				src.synced, src.err = s.srcSynced, s.srcErr
				if got := c.Synchronized(s.atMs); got != s.want || src.reads != s.wantReads {
					t.Fatalf("at %d ms: %v after %d reads, want %v after %d", s.atMs, got, src.reads, s.want, s.wantReads)
				}
			}
			if len(changes) != len(tt.wantChanges) {
				t.Fatalf("changes %v, want %v", changes, tt.wantChanges)
			}
			for i := range changes {
				if changes[i] != tt.wantChanges[i] {
					t.Fatalf("changes %v, want %v", changes, tt.wantChanges)
				}
			}
			if errs != tt.wantErrors {
				t.Fatalf("%d errors reported, want %d", errs, tt.wantErrors)
			}
		})
	}
}

// TestKernel reads the real status: it must answer without an error (the
// value depends on the machine's time daemon).
func TestKernel(t *testing.T) {
	synced, err := Kernel{}.Synchronized()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this machine's clock synchronised: %v", synced)
}
