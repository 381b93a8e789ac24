package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/config"
)

// Host is what a region restart acts on: the agent's pipelines, sources,
// sinks, checkpointer and restorer, by region. Failover decides when and
// in which order; the host does each step.
type Host interface {
	// Route makes failures inside r's pipelines and sinks call fail. fail
	// may be called from any goroutine and never blocks.
	Route(r Region, fail func(error))
	// Shortage reports whether err is a write that failed for a full file
	// system, and which one (disk.ShortageOf). It looks at the file system
	// now, so it is asked before StopRegion removes anything.
	Shortage(err error) (disk.Shortage, bool)
	// WaitForSpace returns once the file system short names has room
	// again, or ctx ends; /readyz says meanwhile that r waits for space.
	WaitForSpace(ctx context.Context, r Region, short disk.Shortage, cause error)
	// StopRegion stops r's readers, pipelines and sinks without draining
	// (what they held is replayed from the checkpoint) and suspends
	// checkpoints until StartRegion; reason is why.
	StopRegion(r Region, reason error)
	// StartRegion builds r's pipelines and sinks afresh, routes their
	// failures to fail, restores r's part of the newest completed
	// checkpoint and starts them. On an error nothing of r runs and what
	// it opened is closed, so that it may be called again.
	StartRegion(r Region, fail func(error)) error
}

// Options are what New is handed besides the pipelines.
type Options struct {
	// Restart configures each region's strategy; its Strategy names it in
	// the logs.
	Restart config.Restart
	Log     *slog.Logger
	// Metrics gets eddy_pipeline_restarts_total{pipeline} for each pipeline.
	Metrics *metrics.Set
	// NowMs is the monotonic time in ms the strategies count failures by;
	// required, and never 0 (0 stands for "no failure yet").
	NowMs func() int64
	// Rand returns a number in [0, 1) for the strategies' jitter; nil is
	// math/rand/v2.Float64.
	Rand func() float64
	// After waits out a restart delay; nil is time.After.
	After func(time.Duration) <-chan time.Time
}

// Failover restarts a failed region while the others run on. It owns the
// regions, their strategies and restart counts, and the channel their
// failures arrive on; the pipelines, sources and sinks are the host's.
// Restart, Route, InheritRestarts and CarryRestarts run on one goroutine
// (the agent's run goroutine); the failure callbacks Route installs and
// Limits may be called from any.
type Failover struct {
	regions []*region
	// failed receives failures inside regions; a failure that finds it
	// full is dropped, since the restart of those queued serves it.
	failed chan Failure
	// limits are the regions whose restart strategy gave up or that wait
	// to restart.
	limits limits
	o      Options
}

// region is a Region with its restart state.
type region struct {
	Region
	strategy *Strategy
	restarts int
	gen      int                // incremented by each restart attempt; failures of older ones are stale
	counters []*metrics.Counter // eddy_pipeline_restarts_total of each pipeline
}

// Failure is a failure reported inside a region.
type Failure struct {
	Err error
	r   *region
	gen int
}

// Region is the region that failed.
func (f Failure) Region() Region { return f.r.Region }

// ErrGaveUp marks the error of a region whose restart strategy gave up:
// the agent exits non-zero rather than restarting everything.
var ErrGaveUp = errors.New("restart strategy gives up")

// New groups pipes into regions (Regions), each with a fresh strategy of
// o.Restart. Nothing is routed until Route.
func New(pipes []Pipeline, o Options) *Failover {
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.After == nil {
		o.After = time.After
	}
	fo := &Failover{failed: make(chan Failure, 16), o: o}
	for _, rg := range Regions(pipes) {
		r := &region{Region: rg, strategy: NewStrategy(o.Restart)}
		for _, i := range rg.Pipes {
			r.counters = append(r.counters, o.Metrics.GetOrCreateCounter(fmt.Sprintf(`eddy_pipeline_restarts_total{pipeline=%q}`, pipes[i].Name)))
		}
		fo.regions = append(fo.regions, r)
	}
	return fo
}

// Regions returns the regions, in the order of their first pipeline.
func (fo *Failover) Regions() []Region {
	out := make([]Region, len(fo.regions))
	for k, r := range fo.regions {
		out[k] = r.Region
	}
	return out
}

// Route has h make failures inside every region report to it (Failed).
func (fo *Failover) Route(h Host) {
	for _, r := range fo.regions {
		h.Route(r.Region, fo.report(r))
	}
}

// Failed is where failures inside regions arrive, for Restart.
func (fo *Failover) Failed() <-chan Failure { return fo.failed }

// Limits returns the regions whose strategy gave up, then those waiting to
// restart, by name.
func (fo *Failover) Limits() []Limit { return fo.limits.list() }

// report returns the callback of r's current generation.
func (fo *Failover) report(r *region) func(error) {
	gen := r.gen
	return func(err error) {
		select {
		case fo.failed <- Failure{r: r, gen: gen, Err: err}:
		default: // failures are already queued; one restart serves them
		}
	}
}

// InheritRestarts starts every region's restart strategy where the
// run-level one stands: a run that failed as a whole (a region failing as
// its input ended, too late to restart it alone) spends the same attempts
// as a region restart, so a persistent failure gives up after the
// configured attempts, whichever way it recurs.
func (fo *Failover) InheritRestarts(s *Strategy, restarts int) {
	for _, r := range fo.regions {
		*r.strategy = s.clone()
		r.restarts = restarts
	}
}

// CarryRestarts is InheritRestarts' other half, after a run: the run-level
// strategy takes the state of the region that restarted most, and the
// restart count goes on from it.
func (fo *Failover) CarryRestarts(s *Strategy, restarts int) int {
	for _, r := range fo.regions {
		if r.restarts > restarts {
			restarts = r.restarts
			*s = r.strategy.clone()
		}
	}
	return restarts
}

// Restart handles failure f through h: it stops the failed region, waits
// the strategy's delay, rebuilds it, restores its part of the newest
// completed checkpoint and starts it, while the other regions keep
// running. A full file system is waited out instead, not counted by the
// strategy. A failure of a generation already restarted is ignored. It
// returns an error wrapping ErrGaveUp when the strategy gives up (or the
// region cannot be rebuilt and the strategy then gives up, or ctx ends
// and the region cannot start).
func (fo *Failover) Restart(ctx context.Context, h Host, f Failure) error {
	log := fo.o.Log
	r := f.r
	if f.gen != r.gen {
		return nil // from a generation already restarted
	}
	// Free space is looked at before the region stops: stopping may
	// remove files (uncommitted parts) and blur what the failure saw.
	short, full := h.Shortage(f.Err)
	h.StopRegion(r.Region, f.Err)
	for {
		if full {
			// A full file system is waited out, not counted by the
			// strategy; any other failure, ENOSPC from a device or a
			// quota included, goes to the strategy below.
			h.WaitForSpace(ctx, r.Region, short, f.Err)
			if f.Err = fo.start(h, r); f.Err == nil {
				fo.limits.setUp(r.Name)
				log.Info("pipelines restarted", "pipelines", r.Name, "restarts", r.restarts)
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%w: pipelines %s could not restart while stopping: %w", ErrGaveUp, r.Name, f.Err)
			}
			log.Error("restarting pipelines failed", "pipelines", r.Name, "err", f.Err)
			short, full = h.Shortage(f.Err)
			continue
		}
		delay, giveUp := fo.nextRestart(r, fo.o.NowMs(), fo.o.Rand(), f.Err)
		if giveUp {
			log.Error("restart strategy gives up: exiting", "pipelines", r.Name, "strategy", fo.o.Restart.Strategy, "err", f.Err)
			return fmt.Errorf("%w: pipelines %s: %w", ErrGaveUp, r.Name, f.Err)
		}
		r.restarts++
		for _, c := range r.counters {
			c.Inc()
		}
		log.Warn("pipelines failed: restarting from the last checkpoint", "pipelines", r.Name, "in", delay,
			"restarts", r.restarts, "strategy", fo.o.Restart.Strategy, "err", f.Err)
		select {
		case <-fo.o.After(delay):
		case <-ctx.Done():
			// Stopping: start the region at once, so that shutdown (and
			// its final checkpoint) finds every region running.
		}
		err := fo.start(h, r)
		if err == nil {
			fo.limits.setUp(r.Name)
			log.Info("pipelines restarted", "pipelines", r.Name, "restarts", r.restarts)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: pipelines %s could not restart while stopping: %w", ErrGaveUp, r.Name, err)
		}
		// Nothing of the region runs: try again as the strategy allows.
		f.Err = err
		short, full = h.Shortage(err)
		log.Error("restarting pipelines failed", "pipelines", r.Name, "err", err)
	}
}

// start starts region r in a new generation: failures of the previous
// ones, still queued, are stale from now on.
func (fo *Failover) start(h Host, r *region) error {
	r.gen++
	return h.StartRegion(r.Region, fo.report(r))
}
