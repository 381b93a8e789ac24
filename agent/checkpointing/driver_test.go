package checkpointing

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/checkpoint"
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
