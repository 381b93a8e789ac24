package checkpointing

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/state/vfs"
)

// newDriver returns a Driver of one task over a store in a temporary
// directory; Run is not called.
func newDriver(t *testing.T) *Driver {
	t.Helper()
	store, err := checkpoint.OpenStore(vfs.Default, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	coord, err := checkpoint.NewCoordinator(checkpoint.DefaultConfig("src/s"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	return New(coord, Config{Store: store, Retain: 3, Interval: time.Second, Timeout: time.Minute,
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		MonoMs: func() int64 { return time.Since(start).Milliseconds() }, Metrics: metrics.NewSet()})
}

// TestDriver_FinalBoundedWhenLoopEnded: Final forces a checkpoint through
// the coordinator's loop; once that loop has ended (checkpoints kept
// failing, so the agent is stopping) nothing answers, and Final must still
// return when its context ends (a SIGTERM while checkpoints kept failing
// used to hang the agent here for good).
func TestDriver_FinalBoundedWhenLoopEnded(t *testing.T) {
	c := newDriver(t) // Run does not run
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Final(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Final = %v, want the context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Final did not return after its context ended")
	}
}

// loopSource is a Source that acknowledges each barrier at once, for
// itself and for the exactly-once sink behind it, as a source with a
// stateless pipeline would.
type loopSource struct {
	d    *Driver
	sent atomic.Uint64
}

func (s *loopSource) InjectBarrier(tr checkpoint.Trigger) {
	s.d.Send(checkpoint.Ack{CheckpointID: tr.ID, Task: "src/s", Positions: map[string]uint64{"s": s.sent.Load()}})
	s.d.Send(checkpoint.Ack{CheckpointID: tr.ID, Task: "sink/out"})
}
func (s *loopSource) Forwarded() uint64   { return s.sent.Load() }
func (s *loopSource) Ingest() IngestState { return IngestState{} }

// recordingSink is a TxSink that records its commits.
type recordingSink struct {
	mu      sync.Mutex
	commits []uint64
}

func (s *recordingSink) Commit(id uint64) {
	s.mu.Lock()
	s.commits = append(s.commits, id)
	s.mu.Unlock()
}
func (s *recordingSink) Written() uint64    { return 0 }
func (s *recordingSink) WriteBlocked() bool { return false }
func (s *recordingSink) committed() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commits)
}

// TestDriver_CompletesCommitsAndSkipsIdle runs a Driver: a checkpoint
// triggered by what the source forwarded completes, its manifest is in the
// store, the sink commits it before the completion callbacks run, and the
// history and stats say so; with nothing forwarded after it, ticks leave
// the coordinator alone; a savepoint is still taken.
func TestDriver_CompletesCommitsAndSkipsIdle(t *testing.T) {
	store, err := checkpoint.OpenStore(vfs.Default, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ccfg := checkpoint.DefaultConfig("src/s", "sink/out")
	ccfg.Interval = 20 * time.Millisecond
	coord, err := checkpoint.NewCoordinator(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	src, sink := &loopSource{}, &recordingSink{}
	start := time.Now()
	d := New(coord, Config{Store: store, Retain: 2, Interval: ccfg.Interval, Timeout: time.Minute,
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		MonoMs: func() int64 { return time.Since(start).Milliseconds() }, Metrics: metrics.NewSet(),
		Sources: []Source{src}, TxSinks: []TxSink{sink}})
	src.d = d
	done := make(chan uint64, 16)
	d.OnCompleted(func(c checkpoint.Completed) {
		if !slices.Contains(sink.committed(), c.ID) {
			t.Errorf("checkpoint %d completed before the sink committed it", c.ID)
		}
		done <- c.ID
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()

	src.sent.Add(1)
	var first uint64
	select {
	case first = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no checkpoint completed within 30 s of the source forwarding")
	}
	if ids, err := store.ManifestIDs(); err != nil || !slices.Contains(ids, first) {
		t.Fatalf("store's manifests %v (%v), want %d among them", ids, err, first)
	}
	st := d.Stats()
	if st.Completed != 1 || st.LastCompletedID != first || d.LastCompleted() != first {
		t.Errorf("Stats() = %+v after checkpoint %d", st, first)
	}
	if h := d.History(); len(h) != 1 || h[0].ID != first || h[0].Aborted != "" {
		t.Errorf("History() = %+v, want checkpoint %d completed", h, first)
	}

	idle := d.Stats().IdleTicks
	await.True(t, 30*time.Second, "ten idle ticks", func() bool { return d.Stats().IdleTicks >= idle+10 })
	if got := d.LastCompleted(); got != first {
		t.Fatalf("checkpoint %d completed with nothing forwarded since %d", got, first)
	}

	spCtx, spCancel := context.WithTimeout(ctx, 30*time.Second)
	defer spCancel()
	sp, err := d.Savepoint(spCtx)
	if err != nil || sp <= first {
		t.Fatalf("Savepoint = %d, %v; want one after %d", sp, err, first)
	}
	if h := d.History(); h[len(h)-1].Kind != checkpoint.KindSavepoint.String() {
		t.Errorf("last record %+v, want the savepoint", h[len(h)-1])
	}
}
