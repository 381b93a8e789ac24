package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/agent/checkpointing"
	"github.com/eddy-edge/eddy/agent/clocksync"
	"github.com/eddy-edge/eddy/agent/devicemem"
	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/agent/failover"
	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/agent/introspect"
	"github.com/eddy-edge/eddy/agent/offsite"
	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/sparkplug"
)

// Options are the run-time settings that do not come from the config file.
type Options struct {
	Version string
	// Stderr receives logs; Stdout receives stdout sinks. Nil means os.Stderr
	// and os.Stdout.
	Stderr, Stdout io.Writer
	// Ready, if set, is called once everything is started, with the agent.
	Ready func(*Agent)
	// From selects the checkpoint to restore: "" for the newest that
	// verifies, an id, a manifest path or a checkpoint directory.
	From string
	// AllowNonRestoredState drops checkpointed state of pipelines the
	// configuration no longer has, or whose window, key, aggregates or
	// source changed (or whose window state has the other layout), instead
	// of refusing to start.
	AllowNonRestoredState bool
	// AllowNewDeviceID lets the agent start under a device id other than
	// the one recorded in data_dir, and records the new one.
	AllowNewDeviceID bool
	// Reload, when set, delivers reload requests (SIGHUP): the file is read
	// again and applied if it keeps state compatible.
	Reload <-chan struct{}
	// ClockStatus says whether the device clock is synchronised; nil: the
	// kernel's view (adjtimex).
	ClockStatus clocksync.Source
}

// Agent is a running configuration: it runs the job graph its
// configuration opened (flow) through the run phases (run.go), with the
// checkpointer, the failover regions and the admin endpoint.
type Agent struct {
	cfg      *config.Config
	deviceID string
	log      *slog.Logger
	metrics  *metrics.Set
	clk      clock
	flow     *dataflow
	intro    *introspect.View
	endpoint *adminEndpoint
	memory   memoryBudget
	ckpt     *checkpointing.Driver
	failed   chan error // a component that cannot go on; run stops
	upload   offsite.Uploader
	restorer *restorer

	// failover holds the failover regions: a failure restarts only its own.
	failover *failover.Failover
	// inheritRestarts starts a failover built again (an old definition
	// added by a rollover) where the run's restart strategy stands.
	inheritRestarts func(*failover.Failover)
	diskMeter       atomic.Pointer[disk.Meter] // the eddy_disk_* gauges; set by run while the admin endpoint may read it
	diskHolds       disk.Holds                 // what waits for disk space, for /readyz
	restoredID      uint64                     // the checkpoint restored at start, 0 if none
}

// Run loads the configuration at path and runs it until ctx is cancelled or
// every source has ended.
func Run(ctx context.Context, path string, opts Options) error {
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	lc, err := loadConfig(path)
	if err != nil {
		return err
	}
	clk := newClock()
	strategy := failover.NewStrategy(lc.cfg.Restart)
	restarts := 0
	for {
		cfg := lc.cfg
		log := newLogger(opts.Stderr, cfg.Agent.LogLevel, cfg.Agent.LogFormat)
		if err := openDataDir(cfg.Agent.DataDir, log); err != nil {
			return err
		}
		if err := identity.SettleDeviceID(cfg, opts.AllowNewDeviceID, true); err != nil {
			return err
		}
		a, err := build(lc, log, opts)
		if err != nil {
			return err
		}
		a.failover.InheritRestarts(strategy, restarts)
		a.inheritRestarts = func(fo *failover.Failover) { fo.InheritRestarts(strategy, restarts) }
		a.memory.apply(log)
		runCtx, stop := context.WithCancel(ctx)
		next := make(chan loadedConfig, 1)
		if opts.Reload != nil {
			go watchReload(runCtx, path, lc, opts.Reload, log, next, stop)
		}
		err = a.run(runCtx, opts)
		stop()
		restarts = a.failover.CarryRestarts(strategy, restarts)
		select {
		case nl := <-next:
			if err == nil && ctx.Err() == nil {
				// The final checkpoint of that run is what the next one
				// restores; pipelines the reload removed drop their state.
				lc = nl
				opts.From = ""
				strategy.Reconfigure(nl.cfg.Restart)
				log.Info("configuration reloaded", "path", path, "pipelines", len(nl.cfg.Pipelines))
				continue
			}
		default:
		}
		var f *runFailure
		if !errors.As(err, &f) || ctx.Err() != nil {
			return err
		}
		if f.waitedForSpace {
			log.Info("disk has room again: restarting from the last checkpoint (not counted by the restart strategy)", "err", f.err)
			opts.From = ""
			continue
		}
		delay, giveUp := strategy.Next(clk.MonoMs(), rand.Float64())
		if giveUp {
			log.Error("restart strategy gives up: exiting", "strategy", cfg.Restart.Strategy, "err", f.err)
			return err
		}
		restarts++
		log.Warn("pipelines failed: restarting from the last checkpoint", "in", delay, "restarts", restarts,
			"strategy", cfg.Restart.Strategy, "err", f.err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil
		}
		opts.From = "" // the newest checkpoint: the run that failed may have completed more
	}
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	ho := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// build compiles every pipeline and creates sources and sinks without
// starting them.
func build(lc loadedConfig, log *slog.Logger, opts Options) (*Agent, error) {
	cfg := lc.cfg
	clk := newClock().withStatus(opts.ClockStatus, log)
	a := &Agent{cfg: cfg, deviceID: cfg.Agent.DeviceID, log: log, metrics: metrics.NewSet(), clk: clk, failed: make(chan error, 1)}
	var diags hcl.Diagnostics
	var plans []*stages.Plan
	for _, p := range cfg.Pipelines {
		pl, d := stages.Compile(cfg, p)
		diags = append(diags, d...)
		plans = append(plans, pl)
	}
	for _, d := range unsupported(cfg) {
		d.Severity = hcl.DiagError
		diags = append(diags, d)
	}
	if diags.HasErrors() {
		return nil, errors.New("invalid configuration:\n" + strings.TrimRight(config.FormatDiagnostics(diags), "\n"))
	}
	a.restorer = &restorer{log: log, allowNonRestored: opts.AllowNonRestoredState,
		from: opts.From, cfg: cfg}
	a.memory = newMemoryBudget(cfg, devicemem.Total)
	a.flow = &dataflow{cfg: cfg, src: lc.src, deviceID: a.deviceID, log: log, metrics: a.metrics, clk: clk,
		stateCache: a.memory.stateCache, stdout: opts.Stdout, fail: a.fail, holds: &a.diskHolds,
		sources: map[string]*sourceRunner{}, sinks: map[string]*sinkRunner{},
		pipeMetrics: map[string]*stages.Metrics{}, walSinks: map[string]*walHolder{},
		sparkplugSinks: map[string]*atomic.Pointer[sparkplug.Sink]{}, rebirthers: map[string]*lazyRebirther{}}
	for _, p := range plans {
		if err := a.flow.addPipeline(p); err != nil {
			return nil, err
		}
	}
	a.failover = newFailover(a)
	a.intro = newIntrospection(a)
	a.endpoint = &adminEndpoint{cfg: cfg, log: log, view: a.intro}
	return a, nil
}

// fail stops the agent with err (the first one wins).
func (a *Agent) fail(err error) {
	select {
	case a.failed <- err:
	default:
	}
}

// AdminAddr is the admin endpoint's address, or "" when it is off.
func (a *Agent) AdminAddr() string { return a.endpoint.addr() }
