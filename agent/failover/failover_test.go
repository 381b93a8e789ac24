package failover

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/config"
)

// fakeHost records the steps a restart takes and answers as told.
type fakeHost struct {
	fail     map[string]func(error) // by region, the current generation's callback
	full     int                    // Shortage reports a full file system this many times
	startErr []error                // StartRegion's results in turn; nil once used up
	steps    []string               // "stop x", "wait x", "start x"
}

func (h *fakeHost) Route(r Region, fail func(error)) {
	if h.fail == nil {
		h.fail = map[string]func(error){}
	}
	h.fail[r.Name] = fail
}

func (h *fakeHost) Shortage(error) (disk.Shortage, bool) {
	if h.full > 0 {
		h.full--
		return disk.Shortage{}, true
	}
	return disk.Shortage{}, false
}

func (h *fakeHost) WaitForSpace(_ context.Context, r Region, _ disk.Shortage, _ error) {
	h.steps = append(h.steps, "wait "+r.Name)
}

func (h *fakeHost) StopRegion(r Region, _ error) { h.steps = append(h.steps, "stop "+r.Name) }

func (h *fakeHost) StartRegion(r Region, fail func(error)) error {
	h.steps = append(h.steps, "start "+r.Name)
	var err error
	if len(h.startErr) > 0 {
		err, h.startErr = h.startErr[0], h.startErr[1:]
	}
	if err == nil {
		h.Route(r, fail)
	}
	return err
}

// testFailover is a Failover over pipelines x (source a, sink one) and y
// (source b, sink two) under cfg, on a clock that moves only when the test
// moves *now; waits take no time and are recorded in waited.
type testFailover struct {
	*Failover
	host   *fakeHost
	now    int64
	waited []time.Duration
	// onWait, if set, runs as a restart delay starts.
	onWait func(time.Duration)
	ms     *metrics.Set
}

func newTestFailover(t *testing.T, cfg config.Restart) *testFailover {
	t.Helper()
	tf := &testFailover{host: &fakeHost{}, now: 1000, ms: metrics.NewSet()}
	tf.Failover = New([]Pipeline{{Name: "x", Sources: []string{"a"}, Sinks: []string{"one"}}, {Name: "y", Sources: []string{"b"}, Sinks: []string{"two"}}},
		Options{Restart: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: tf.ms,
			NowMs: func() int64 { return tf.now }, Rand: func() float64 { return 0.5 },
			After: func(d time.Duration) <-chan time.Time {
				tf.waited = append(tf.waited, d)
				if tf.onWait != nil {
					tf.onWait(d)
				}
				c := make(chan time.Time, 1)
				c <- time.Time{}
				return c
			}})
	tf.Route(tf.host)
	return tf
}

// failAndRestart fails region name with err and restarts it.
func (tf *testFailover) failAndRestart(t *testing.T, name string, err error) error {
	t.Helper()
	tf.host.fail[name](err)
	select {
	case f := <-tf.Failed():
		if f.Region().Name != name || f.Err != err {
			t.Fatalf("failure %+v, want region %s with %v", f, name, err)
		}
		return tf.Restart(context.Background(), tf.host, f)
	default:
		t.Fatal("no failure queued")
		return nil
	}
}

func (tf *testFailover) restarts(pipeline string) uint64 {
	return tf.ms.GetOrCreateCounter(`eddy_pipeline_restarts_total{pipeline="` + pipeline + `"}`).Get()
}

// TestRestart_Sequence: a failed region is stopped, waits the strategy's
// delay and starts again; only its pipelines count the restart.
func TestRestart_Sequence(t *testing.T) {
	tf := newTestFailover(t, config.Restart{Strategy: config.RestartFixedDelay, Attempts: 3, Delay: 10 * time.Second})
	if err := tf.failAndRestart(t, "y", errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"stop y", "start y"}; !slices.Equal(tf.host.steps, want) {
		t.Errorf("steps %q, want %q", tf.host.steps, want)
	}
	if want := []time.Duration{10 * time.Second}; !slices.Equal(tf.waited, want) {
		t.Errorf("waited %v, want %v", tf.waited, want)
	}
	if x, y := tf.restarts("x"), tf.restarts("y"); x != 0 || y != 1 {
		t.Errorf("eddy_pipeline_restarts_total x=%d y=%d, want 0 and 1", x, y)
	}
	if l := tf.Limits(); len(l) != 0 {
		t.Errorf("limits %+v after the region runs again", l)
	}
}

// TestRestart_StaleFailure: a failure reported by a generation already
// restarted restarts nothing.
func TestRestart_StaleFailure(t *testing.T) {
	tf := newTestFailover(t, config.Restart{Strategy: config.RestartFixedDelay, Attempts: 3, Delay: time.Second})
	old := tf.host.fail["x"]
	if err := tf.failAndRestart(t, "x", errors.New("first")); err != nil {
		t.Fatal(err)
	}
	tf.host.steps = nil
	old(errors.New("late, from before the restart"))
	if err := tf.Restart(context.Background(), tf.host, <-tf.Failed()); err != nil {
		t.Fatal(err)
	}
	if len(tf.host.steps) != 0 || tf.restarts("x") != 1 {
		t.Errorf("a stale failure: steps %q, %d restarts", tf.host.steps, tf.restarts("x"))
	}
}

// TestRestart_FullDiskNotCounted: a failure for a full file system is
// waited out and the region starts again without asking the strategy, even
// one that gives up at once.
func TestRestart_FullDiskNotCounted(t *testing.T) {
	tf := newTestFailover(t, config.Restart{Strategy: config.RestartNone})
	tf.host.full = 1
	if err := tf.failAndRestart(t, "x", errors.New("no space left on device")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"stop x", "wait x", "start x"}; !slices.Equal(tf.host.steps, want) {
		t.Errorf("steps %q, want %q", tf.host.steps, want)
	}
	if tf.restarts("x") != 0 || len(tf.waited) != 0 {
		t.Errorf("counted: %d restarts, waited %v", tf.restarts("x"), tf.waited)
	}
}

// TestRestart_StartFailsUntilGivingUp: a region that cannot start is
// tried again as the strategy allows; then Restart returns ErrGaveUp.
func TestRestart_StartFailsUntilGivingUp(t *testing.T) {
	tf := newTestFailover(t, config.Restart{Strategy: config.RestartFixedDelay, Attempts: 2, Delay: time.Second})
	tf.host.startErr = []error{errors.New("rebuild 1"), errors.New("rebuild 2")}
	err := tf.failAndRestart(t, "x", errors.New("boom"))
	if !errors.Is(err, ErrGaveUp) || !strings.Contains(err.Error(), "rebuild 2") {
		t.Fatalf("err %v, want ErrGaveUp with the last failure", err)
	}
	if want := []string{"stop x", "start x", "start x"}; !slices.Equal(tf.host.steps, want) {
		t.Errorf("steps %q, want %q", tf.host.steps, want)
	}
	if tf.restarts("x") != 2 {
		t.Errorf("%d restarts, want 2", tf.restarts("x"))
	}
}

// TestRestart_CarriedAcrossRuns: the run-level strategy takes the state of
// the region that restarted most, and hands it to the next run's regions.
func TestRestart_CarriedAcrossRuns(t *testing.T) {
	cfg := config.Restart{Strategy: config.RestartFixedDelay, Attempts: 2, Delay: time.Second}
	tf := newTestFailover(t, cfg)
	if err := tf.failAndRestart(t, "x", errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	run := NewStrategy(cfg)
	restarts := tf.CarryRestarts(run, 0)
	if restarts != 1 {
		t.Fatalf("carried %d restarts, want 1", restarts)
	}
	next := newTestFailover(t, cfg)
	next.InheritRestarts(run, restarts)
	if err := next.failAndRestart(t, "y", errors.New("again")); err != nil {
		t.Fatal(err)
	}
	if err := next.failAndRestart(t, "y", errors.New("and again")); !errors.Is(err, ErrGaveUp) {
		t.Fatalf("the third failure in all: %v, want ErrGaveUp", err)
	}
}
