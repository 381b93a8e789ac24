package walsink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

// offline opens a sink whose broker never answers, so the WAL's state can
// be checked without publishing.
func offline(t testing.TB, dir string) *Sink {
	t.Helper()
	s, err := Open(dir, Options{Broker: "tcp://127.0.0.1:1", ClientID: "offline", ReconnectMin: time.Hour,
		SegmentBytes: 4 << 10}, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func msgs(epoch uint64, n int) []Message {
	m := make([]Message, n)
	for i := range m {
		m[i] = Message{Topic: "up/r", Payload: testPayload(nil, epoch, i)}
	}
	return m
}

func TestSink_Recover(t *testing.T) {
	tests := []struct {
		name string
		// run writes epochs 1..4 (10 messages each), pre-commits 1..pre and
		// commits 1..commit, then the process "crashes" (Close).
		pre, commit   uint64
		recoverTo     uint64
		wantBacklog   int64
		wantNeedCheck bool
	}{
		{name: "checkpoint 3 completed, commit record lost", pre: 3, commit: 2, recoverTo: 3, wantBacklog: 30, wantNeedCheck: true},
		{name: "pre-committed 3 but checkpoint 3 failed", pre: 3, commit: 2, recoverTo: 2, wantBacklog: 20, wantNeedCheck: true},
		{name: "all committed", pre: 4, commit: 4, recoverTo: 4, wantBacklog: 40},
		{name: "nothing completed", pre: 2, commit: 0, recoverTo: 0, wantBacklog: 0, wantNeedCheck: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := offline(t, dir)
			for e := uint64(1); e <= 4; e++ {
				if err := s.Write(e, msgs(e, 10)); err != nil {
					t.Fatal(err)
				}
				if e <= tt.pre {
					if err := s.PreCommit(e); err != nil {
						t.Fatal(err)
					}
				}
				if e <= tt.commit {
					if err := s.Commit(e); err != nil {
						t.Fatal(err)
					}
				}
			}
			s.Close()

			s = offline(t, dir)
			defer s.Close()
			err := s.Write(tt.recoverTo+1, msgs(tt.recoverTo+1, 1))
			if tt.wantNeedCheck != errors.Is(err, ErrRecoverRequired) {
				t.Errorf("Write before Recover: %v, want ErrRecoverRequired: %v", err, tt.wantNeedCheck)
			}
			if err := s.Recover(tt.recoverTo); err != nil {
				t.Fatal(err)
			}
			if got := s.Stats().BacklogMessages; got != tt.wantBacklog {
				t.Errorf("backlog after Recover(%d) = %d, want %d", tt.recoverTo, got, tt.wantBacklog)
			}
			// Replay writes the next epoch again.
			next := tt.recoverTo + 1
			if err := s.Write(next, msgs(next, 5)); err != nil {
				t.Fatalf("Write(%d) after Recover: %v", next, err)
			}
			if err := s.PreCommit(next); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(next); err != nil {
				t.Fatal(err)
			}
			if got := s.Stats().BacklogMessages; got != tt.wantBacklog+5 {
				t.Errorf("backlog after re-writing epoch %d = %d, want %d", next, got, tt.wantBacklog+5)
			}
			s.Close()

			// A third open replays the abort and finds the same backlog.
			s = offline(t, dir)
			defer s.Close()
			if got := s.Stats().BacklogMessages; got != tt.wantBacklog+5 {
				t.Errorf("backlog after reopen = %d, want %d", got, tt.wantBacklog+5)
			}
			if err := s.Write(next+1, msgs(next+1, 1)); err != nil {
				t.Errorf("Write after clean reopen: %v", err)
			}
		})
	}
}

// TestSink_WriteAllocs: the hot path (Write of an epoch already open)
// does not allocate.
func TestSink_WriteAllocs(t *testing.T) {
	s := offline(t, t.TempDir())
	defer s.Close()
	s.opts.SegmentBytes = 1 << 30 // no rotation inside the measurement
	m := msgs(1, 100)
	if err := s.Write(1, m); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() {
		if err := s.Write(1, m); err != nil {
			t.Fatal(err)
		}
	}); a > 0 {
		t.Errorf("%.1f allocations per Write of 100 messages, want 0", a)
	}
}

func BenchmarkSink_Write(b *testing.B) {
	s := offline(b, b.TempDir())
	defer s.Close()
	s.opts.SegmentBytes = 1 << 40
	s.opts.MaxDiskBytes = 1 << 40
	m := msgs(1, 100)
	b.SetBytes(int64(len(m[0].Payload)) * 100)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Write(1, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "msgs/s")
}

// TestSink_BlockedWrite_ContextAndClose: a Write blocked on a full WAL
// returns when its context ends, and with ErrClosed when the sink closes.
func TestSink_BlockedWrite_ContextAndClose(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Broker: "tcp://127.0.0.1:1", ClientID: "offline", ReconnectMin: time.Hour,
		MaxDiskBytes: 64 << 10, SegmentBytes: 16 << 10}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for e := uint64(1); s.Stats().WALBytes < 60<<10; e++ {
		if err := s.Write(e, msgs(e, 20)); err != nil {
			t.Fatal(err)
		}
		s.PreCommit(e)
		s.Commit(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.WriteContext(ctx, 1000, msgs(1000, 100)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("blocked WriteContext = %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Write(1000, msgs(1000, 100)) }()
	// Close must find the Write waiting.
	await.True(t, 10*time.Second, "the Write to block on the full WAL", s.WriteBlocked)
	s.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("blocked Write after Close = %v, want ErrClosed", err)
	}
}
