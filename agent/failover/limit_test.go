package failover

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/config"
)

// errFull stands for a full state store.
var errFull = errors.New("state store full")

// TestRestartLimit_Reached: a region failing with a full state store, under
// fixed_delay with 2 attempts, is restarted twice; at the third failure the
// strategy gives up and the limit names the pipeline, the limit and the
// last error on one line.
func TestRestartLimit_Reached(t *testing.T) {
	tf := newTestFailover(t, config.Restart{Strategy: config.RestartFixedDelay, Attempts: 2, Delay: 10 * time.Millisecond})
	failure := fmt.Errorf("pipeline %q subtask 0: window: %w\n\tat the next line", "x", errFull)
	for i := 0; i < 3; i++ {
		if l := tf.Limits(); len(l) != 0 {
			t.Fatalf("failure %d: limits %+v while the region runs", i+1, l)
		}
		err := tf.failAndRestart(t, "x", failure)
		if errors.Is(err, ErrGaveUp) != (i == 2) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
		tf.now += 1500
	}
	l := tf.Limits()
	if len(l) != 1 || l[0].Pipelines != "x" {
		t.Fatalf("limits %+v, want one for x", l)
	}
	want := "pipelines x: restart limit reached: 2 restarts in 3s (strategy fixed_delay); last error: "
	if d := l[0].Detail(); !strings.HasPrefix(d, want) || !strings.Contains(d, errFull.Error()) || strings.Contains(d, "\n") {
		t.Errorf("detail %q, want one line starting %q with the error", d, want)
	}
}

// TestRestartStrategy_Span: the span a limit reports covers the failures
// the strategy counted.
func TestRestartStrategy_Span(t *testing.T) {
	tests := []struct {
		name  string
		cfg   config.Restart
		fails []int64
		want  time.Duration
	}{
		{"fixed_delay: since the first", config.Restart{Strategy: config.RestartFixedDelay, Attempts: 2}, []int64{100, 600, 2100}, 2 * time.Second},
		{"failure_rate: within the interval", config.Restart{Strategy: config.RestartFailureRate, MaxFailuresPerInterval: 1, FailureRateInterval: time.Second},
			[]int64{100, 5000, 5400}, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewStrategy(tt.cfg)
			var giveUp bool
			for _, f := range tt.fails {
				_, giveUp = r.Next(f, 0.5)
			}
			if !giveUp {
				t.Fatal("the strategy did not give up")
			}
			if got := r.span(tt.fails[len(tt.fails)-1]); got != tt.want {
				t.Errorf("span = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRestartLoop_Down: under exponential_delay, which never gives up, a
// region waiting for its next restart has a limit saying when it restarts
// and why it failed; once it runs again it has none.
func TestRestartLoop_Down(t *testing.T) {
	tf := newTestFailover(t, config.Restart{Strategy: config.RestartExponentialDelay, InitialBackoff: time.Second,
		MaxBackoff: time.Minute, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour})
	failure := fmt.Errorf("pipeline %q subtask 0: window: %w", "x", errFull)
	for i, wantNext := range []string{"1s", "2s", "4s"} {
		var during []Limit
		tf.onWait = func(time.Duration) { during = tf.Limits() }
		if err := tf.failAndRestart(t, "x", failure); err != nil {
			t.Fatalf("exponential_delay: %v", err)
		}
		want := fmt.Sprintf("pipelines x: down, restarting in %s: %d restarts in", wantNext, i+1)
		if len(during) != 1 || !strings.HasPrefix(during[0].Detail(), want) || !strings.Contains(during[0].Detail(), errFull.Error()) {
			t.Errorf("failure %d: limits while waiting %+v, want one starting %q and carrying the error", i+1, during, want)
		}
		if l := tf.Limits(); len(l) != 0 {
			t.Errorf("failure %d: limits %+v once it runs again", i+1, l)
		}
		tf.now += 500
	}
}
