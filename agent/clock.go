package agent

import (
	"log/slog"
	"time"

	"github.com/eddy-edge/eddy/agent/clocksync"
)

// clock gives the two times a pipeline needs: the device's wall clock, for
// the future-skew check, output timestamps and processing time between
// readings (a reading's own processing time is its arrival, from the
// ingest log), and a monotonic time for the durations the agent measures
// (idle inputs, alignment timeouts, restarts), which an NTP step on a
// device without a real-time clock must not stretch. It is the
// stages.Clock the pipelines are handed.
type clock struct {
	start   time.Time // carries Go's monotonic reading
	startMs int64
	// status says whether the wall clock is synchronised; nil: it counts
	// as synchronised.
	status *clocksync.Cached
}

func newClock() clock {
	now := time.Now()
	return clock{start: now, startMs: now.UnixMilli()}
}

// withStatus returns c with the synchronisation status read from src (the
// kernel's when nil) at most once a second, logging each change.
func (c clock) withStatus(src clocksync.Source, log *slog.Logger) clock {
	if src == nil {
		src = clocksync.Kernel{}
	}
	c.status = clocksync.NewCached(src, time.Second, func(synced bool) {
		if synced {
			log.Info("device clock synchronised: readings are checked against max_future_skew from now on")
		} else {
			log.Warn("device clock not synchronised (no NTP yet; the kernel reports STA_UNSYNC): readings are not checked against max_future_skew until it is")
		}
	}, func(err error) {
		log.Warn("cannot read whether the device clock is synchronised: max_future_skew applies as configured", "err", err)
	})
	return c
}

// MonoMs is the monotonic time in ms: the wall time at start plus the
// monotonic time elapsed since, so it reads like a timestamp but never jumps.
func (c clock) MonoMs() int64 { return c.startMs + time.Since(c.start).Milliseconds() }

// WallMs is the wall clock in ms.
func (c clock) WallMs() int64 { return time.Now().UnixMilli() }

// WallSynced reports whether the wall clock is synchronised (NTP): until
// it is, a device without a real-time clock may read 1970 or the time it
// shut down, and its wall clock is no reference for readings' timestamps.
func (c clock) WallSynced() bool {
	return c.status == nil || c.status.Synchronized(c.MonoMs())
}
