// Package agent builds Eddy's pipelines from a configuration and runs them:
// the embedded broker, sources, the per-pipeline stages, sinks and the admin
// endpoint. It owns every goroutine and every piece of I/O; the operators it
// drives (decoders, expressions, window operators) are pure logic.
//
// Life cycle: Run loads and compiles the configuration, starts sinks, then
// pipelines, then sources, then the admin endpoint. Cancelling the context
// (SIGINT, SIGTERM) stops the sources; every record already taken in drains
// through the pipelines and sinks before Run returns. A file source that
// reaches its end flushes every window and, when every source has ended, Run
// returns without a signal.
package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/agent/clocksync"
	"github.com/eddy-edge/eddy/agent/devicemem"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/checkpoint/vfs"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/broker"
	"github.com/eddy-edge/eddy/operators/ingest"
	"github.com/eddy-edge/eddy/operators/sink"
	"github.com/eddy-edge/eddy/operators/source"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/upload"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/watermark"
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

// Agent is a running configuration.
type Agent struct {
	cfg       *config.Config
	src       []byte // the configuration's text (state shapes compare expressions by it)
	deviceID  string
	log       *slog.Logger
	metrics   *metrics.Set
	clk       clock
	broker    *broker.Broker
	sources   map[string]*sourceRunner
	sims      []*source.Simulator
	sinks     map[string]*sinkRunner
	pipelines []*pipeline
	admin     *admin
	stdout    io.Writer
	backends  []state.Backend
	memory    memoryBudget
	logs      []*ingest.Log
	ckpt      *checkpointer
	from      string     // --from: the checkpoint to restore
	failed    chan error // a component that cannot go on; run stops
	shipper   *upload.Shipper
	// shipperSeen publishes shipper to the admin endpoint, which starts
	// first (the upload's start may wait for the S3 server).
	shipperSeen atomic.Pointer[upload.Shipper]
	// allowNonRestored: see Options.AllowNonRestoredState.
	allowNonRestored bool

	// regions are the failover regions: a failure restarts only its own.
	regions      []*region
	regionFailed chan regionFailure
	// restartLimits are the regions whose restart strategy gave up.
	restartLimits restartLimits
	// mu guards pipelines, sources and sinks, which a region restart
	// replaces while the admin endpoint reads them.
	mu          sync.Mutex
	pipeMetrics map[string]*pipelineMetrics // kept across region restarts
	walSinks    map[string]*walHolder       // kept across region restarts
	disk        *diskMeter                  // the eddy_disk_* gauges; set by run
	diskHolds   diskHolds                   // what waits for disk space, for /readyz
	restoredID  uint64                      // the checkpoint restored at start, 0 if none
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
	strategy := &restartStrategy{cfg: lc.cfg.Restart}
	restarts := 0
	for {
		cfg := lc.cfg
		if err := checkDataDir(cfg.Agent.DataDir); err != nil {
			return err
		}
		if err := settleDeviceID(cfg, opts.AllowNewDeviceID, true); err != nil {
			return err
		}
		log := newLogger(opts.Stderr, cfg.Agent.LogLevel, cfg.Agent.LogFormat)
		a, err := build(lc, log, opts)
		if err != nil {
			return err
		}
		a.inheritRestarts(strategy, restarts)
		a.memory.apply(log)
		runCtx, stop := context.WithCancel(ctx)
		next := make(chan loadedConfig, 1)
		if opts.Reload != nil {
			go watchReload(runCtx, path, lc, opts.Reload, log, next, stop)
		}
		err = a.run(runCtx, opts)
		stop()
		restarts = a.carryRestarts(strategy, restarts)
		select {
		case nl := <-next:
			if err == nil && ctx.Err() == nil {
				// The final checkpoint of that run is what the next one
				// restores; pipelines the reload removed drop their state.
				lc = nl
				opts.From, opts.AllowNonRestoredState = "", true
				strategy.cfg = nl.cfg.Restart
				log.Info("configuration reloaded", "path", path, "pipelines", len(nl.cfg.Pipelines))
				continue
			}
		default:
		}
		var f *runFailure
		if !errors.As(err, &f) || ctx.Err() != nil {
			return err
		}
		delay, giveUp := strategy.next(clk.monoMs(), rand.Float64())
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
	a := &Agent{cfg: cfg, src: lc.src, deviceID: cfg.Agent.DeviceID, log: log, metrics: metrics.NewSet(), clk: newClock().withStatus(opts.ClockStatus, log), failed: make(chan error, 1),
		sources: map[string]*sourceRunner{}, sinks: map[string]*sinkRunner{}, regionFailed: make(chan regionFailure, 16),
		pipeMetrics: map[string]*pipelineMetrics{}, walSinks: map[string]*walHolder{}}
	var diags hcl.Diagnostics
	var plans []*plan
	for _, p := range cfg.Pipelines {
		pl, d := compile(cfg, p)
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
	a.stdout = opts.Stdout
	a.from, a.allowNonRestored = opts.From, opts.AllowNonRestoredState
	a.memory = newMemoryBudget(cfg, devicemem.Total)
	for _, p := range plans {
		if err := a.addPipeline(p); err != nil {
			return nil, err
		}
	}
	a.regions = a.failoverRegions()
	return a, nil
}

func (a *Agent) vars(extra ...string) map[string]string {
	v := map[string]string{"device_id": a.deviceID}
	for i := 0; i+1 < len(extra); i += 2 {
		v[extra[i]] = extra[i+1]
	}
	return v
}

// addPipeline creates the runtime of one plan and registers it with its
// source and sinks.
func (a *Agent) addPipeline(pl *plan) error {
	p, err := a.newPipeline(pl)
	if err != nil {
		return err
	}
	a.pipelines = append(a.pipelines, p)
	return nil
}

// newPipeline creates the runtime of one plan, registered with its source
// and sinks (created on first use).
func (a *Agent) newPipeline(pl *plan) (*pipeline, error) {
	name := pl.cfg.Name
	pm := a.pipeMetrics[name]
	if pm == nil {
		pm = newPipelineMetrics(a.metrics, name)
		a.pipeMetrics[name] = pm
	}
	p := &pipeline{
		cfg:        pl.cfg,
		fatal:      a.fail,
		epoch:      1, // dead letters before barrier 1
		ordered:    (pl.window != nil || pl.keyed != nil) && pl.cfg.From.Source.File != nil && pl.cfg.From.Source.File.Path != "-",
		bound:      pl.bound,
		name:       name,
		in:         make(chan *rawBatch, 4),
		prep:       operators.NewPreparer(pl.prep),
		stride:     len(pl.prep.AggArgs),
		eventTime:  pl.eventTime,
		tickEvery:  100 * time.Millisecond,
		m:          pm,
		log:        a.log,
		clk:        a.clk,
		done:       make(chan struct{}),
		debugDelay: pl.cfg.DebugDelayPerRecord,
		align: checkpoint.AlignmentPolicy{Unaligned: a.cfg.Checkpoint.Unaligned,
			AlignedTimeoutMs: a.cfg.Checkpoint.AlignedTimeout.Milliseconds()},
		panicAt: pl.cfg.DebugPanicAtOffset,
	}
	if pl.eventTime {
		src := pl.cfg.From.Source
		if pl.prep.Punctuation != nil {
			p.wm = &punctuatedWatermark{wm: watermark.Min}
		} else if src.MQTT != nil && len(src.MQTT.Topics) > 1 {
			topics := make([]string, len(src.MQTT.Topics))
			for i, t := range src.MQTT.Topics {
				topics[i] = config.Expand(t, a.vars())
			}
			w, err := newInputWatermarks(topics, pl.bound, src.Watermark.IdleTimeout.Milliseconds(), a.clk.monoMs())
			if err != nil {
				return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
			p.wm = w
		} else {
			g, err := watermark.NewBoundedOutOfOrder(pl.bound)
			if err != nil {
				return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
			p.wm = g
		}
		p.tickEvery = 0
		if pl.window != nil && pl.window.EarlyEvery > 0 {
			p.tickEvery = 100 * time.Millisecond
		}
	}
	p.maxKeyGroups = a.cfg.Agent.MaxKeyGroups
	keyedState := pl.window != nil || pl.keyed != nil // the subtasks keep state
	if pl.window != nil {
		p.windowState = windowStateName(*pl.window)
	}
	if keyedState {
		p.shape, _ = json.Marshal(pipelineShape(a.src, pl.cfg)) // strings only: cannot fail
	}
	p.merge.done = make(chan struct{})
	var usage []stateUsage
	if keyedState {
		usage = make([]stateUsage, pl.parallelism)
		pm.state.Store(&usage)
	}
	for i := 0; i < pl.parallelism; i++ {
		p.edges = append(p.edges, stream.NewEdge(16))
		st := &subtask{index: i, epoch: 1, replayWM: math.MinInt64} // epoch n: output before barrier n
		var op *window.Operator
		if keyedState {
			be, err := a.openBackend(name, i, pl.parallelism)
			if err != nil {
				return nil, err
			}
			st.backend, st.usage = be, &usage[i]
			if st.inflight, err = be.Bucket("inflight", state.KeyGroupPrefix); err != nil {
				return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
			if p.ordered {
				if st.held, err = be.Bucket("held", state.KeyGroupPrefix); err != nil {
					return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
				}
			}
		}
		if pl.window != nil {
			store, err := window.NewStateStore(st.backend, p.windowState, aggFuncs(pl.window.Aggs))
			if err != nil {
				return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
			st.store = store
			var opStore window.Store = store
			if pl.cfg.MaxKeys > 0 {
				st.liveKeys = window.NewLiveKeys(store)
				opStore = st.liveKeys
			}
			op, err = window.NewOperator(*pl.window, opStore)
			if err != nil {
				return nil, fmt.Errorf("agent: pipeline %q: %w", name, err)
			}
		}
		st.task = operators.NewWindowTask(name, a.deviceID, pl.names, op)
		if pl.keyed != nil {
			if err := a.attachKeyed(pl, st); err != nil {
				return nil, err
			}
		}
		p.subtasks = append(p.subtasks, st)
	}
	for _, ref := range pl.cfg.To {
		s, err := a.sink(ref.Sink)
		if err != nil {
			return nil, err
		}
		s.addProducers(pl.parallelism)
		p.to = append(p.to, s)
	}
	if ref := pl.cfg.LateOutput; ref != nil {
		s, err := a.sink(ref.Sink)
		if err != nil {
			return nil, err
		}
		s.addProducers(pl.parallelism)
		p.late = s
	}
	if ref := pl.cfg.DeadLetter; ref != nil {
		s, err := a.sink(ref.Sink)
		if err != nil {
			return nil, err
		}
		// The prepare stage dead-letters readings; the window subtasks
		// too, results larger than a sink's max_payload, and then they
		// pass barriers to it like to any sink they write.
		p.deadLetter = s
		p.resultDeadLetters = slices.ContainsFunc(p.to, func(r *sinkRunner) bool { return r.maxPayload > 0 }) ||
			p.subtasks[0].liveKeys != nil || // readings refused by max_keys
			pl.keyed != nil // readings the keyed subtasks reject
		n := 1
		if p.resultDeadLetters {
			n += pl.parallelism
		}
		s.addProducers(n)
		s.deadLetters = true
	}
	if p.subtasks[0].liveKeys != nil {
		p.limitKeys(pl.cfg.MaxKeys)
	}
	sr, err := a.source(pl.cfg.From.Source)
	if err != nil {
		return nil, err
	}
	sr.outs = append(sr.outs, p.in)
	if ref := pl.cfg.Control; ref != nil {
		cr, err := a.source(ref.Source)
		if err != nil {
			return nil, err
		}
		p.control = pl.control
		p.controlIn = make(chan *rawBatch, 4)
		cr.outs = append(cr.outs, p.controlIn)
		a.metrics.GetOrCreateGauge(fmt.Sprintf(`eddy_control_keys{pipeline=%q}`, name), func() float64 { return float64(pm.controlKeys.Load()) })
	}
	return p, nil
}

// source returns the runner of src, creating it on first use: pipelines that
// read one source share its connection.
func (a *Agent) source(src *config.Source) (*sourceRunner, error) {
	if r, ok := a.sources[src.Name]; ok {
		return r, nil
	}
	r := newSourceRunner(src.Name, nil)
	switch {
	case src.File != nil:
		r.reopen = func() source.Source { return source.NewFile(source.FileOptions{Path: src.File.Path}) }
		r.src = r.reopen()
		r.replayable = src.File.Path != "-"
	case src.MQTT != nil:
		m := src.MQTT
		topics := make([]string, len(m.Topics))
		for i, t := range m.Topics {
			topics[i] = config.Expand(t, a.vars())
		}
		if m.Broker == config.Embedded {
			b, err := a.embeddedBroker()
			if err != nil {
				return nil, err
			}
			in, err := a.openIngest(src.Name, dedupOptions(m))
			if err != nil {
				return nil, err
			}
			r.ilog, r.intake = in.log, embeddedIntake(b, topics, in)
			break
		}
		mopts, err := mqttSourceOptions(m, a.vars())
		if err != nil {
			return nil, fmt.Errorf("agent: source %q: %w", src.Name, err)
		}
		connected := a.metrics.NewGauge(fmt.Sprintf(`eddy_mqtt_connected{source=%q}`, src.Name), nil)
		reconnects := a.metrics.NewCounter(fmt.Sprintf(`eddy_mqtt_reconnects_total{source=%q}`, src.Name))
		first := true
		mopts.OnConnectionChange = func(up bool) {
			if up {
				connected.Set(1)
				if !first {
					reconnects.Inc()
				}
				first = false
			} else {
				connected.Set(0)
			}
		}
		r.src, _ = newMQTTSource(m, mopts, a.log) // its Run makes the check
		in, err := a.openIngest(src.Name, dedupOptions(m))
		if err != nil {
			return nil, err
		}
		r.ilog, r.intake = in.log, mqttIntake(r.src, in, a.log, src.Name, func(err error) { r.err = err })
	case src.Simulator != nil:
		s := src.Simulator
		url := s.Broker
		if url == config.Embedded {
			b, err := a.embeddedBroker()
			if err != nil {
				return nil, err
			}
			url = b.URL()
			in, err := a.openIngest(src.Name, ingest.DedupOptions{})
			if err != nil {
				return nil, err
			}
			r.ilog, r.intake = in.log, embeddedIntake(b, []string{s.SubscribeFilter()}, in)
		} else {
			r.src = source.NewMQTT(source.MQTTOptions{Broker: url, ClientID: "eddy-" + a.deviceID + "-" + src.Name + "-in",
				Topics: []string{s.SubscribeFilter()}, QoS: 1}, a.log)
			in, err := a.openIngest(src.Name, ingest.DedupOptions{})
			if err != nil {
				return nil, err
			}
			r.ilog, r.intake = in.log, mqttIntake(r.src, in, a.log, src.Name, func(err error) { r.err = err })
		}
		a.sims = append(a.sims, source.NewSimulator(simulatorOptions(src.Name, a.deviceID, url, s), a.log))
	default:
		return nil, fmt.Errorf("agent: source %q has no known type", src.Name)
	}
	if r.ilog != nil {
		a.metrics.NewGauge(fmt.Sprintf(`eddy_ingest_lag_records{source=%q}`, src.Name), func() float64 { return float64(r.ingestLag()) })
	}
	a.sources[src.Name] = r
	return r, nil
}

// mqttSourceOptions are the client options of the MQTT source m, without a
// connection callback.
func mqttSourceOptions(m *config.MQTTSource, vars map[string]string) (source.MQTTOptions, error) {
	tc, err := tlsConfig(m.TLS)
	if err != nil {
		return source.MQTTOptions{}, err
	}
	topics := make([]string, len(m.Topics))
	for i, t := range m.Topics {
		topics[i] = config.Expand(t, vars)
	}
	return source.MQTTOptions{
		Broker: m.Broker, ClientID: config.Expand(m.ClientID, vars), Topics: topics, QoS: byte(m.QoS),
		Username: m.Username, Password: m.Password, CleanSession: m.CleanSession, KeepAlive: m.KeepAlive,
		ReconnectMin: m.ReconnectMin, ReconnectMax: m.ReconnectMax, TLS: tc, MaxMessageSize: int(m.MaxMessageSize),
	}, nil
}

// newMQTTSource creates the client of the MQTT source m (shared
// subscriptions over m.Connections connections when there are several)
// without connecting; check reports what its Run would refuse.
func newMQTTSource(m *config.MQTTSource, o source.MQTTOptions, log *slog.Logger) (src source.Source, check func() error) {
	if m.Connections > 1 {
		s := source.NewSharedMQTT(o, source.SharedOptions{Connections: m.Connections}, log)
		return s, s.Check
	}
	return source.NewMQTT(o, log), o.Check
}

// simulatorOptions are the options of the simulator source name, publishing
// to the broker at url.
func simulatorOptions(name, deviceID, url string, s *config.SimulatorSource) source.SimulatorOptions {
	return source.SimulatorOptions{
		Broker: url, ClientID: "eddy-" + deviceID + "-" + name + "-sim", Topic: s.Topic, Devices: s.Devices,
		Rate: s.Rate, Seed: s.Seed, OutOfOrder: s.OutOfOrder, Late: s.Late, Malformed: s.Malformed,
		MaxReadings: s.MaxReadings, QoS: 1,
	}
}

func (a *Agent) embeddedBroker() (*broker.Broker, error) {
	if a.broker != nil {
		return a.broker, nil
	}
	bc := a.cfg.Broker
	tc, err := brokerTLSConfig(bc.TLS)
	if err != nil {
		return nil, fmt.Errorf("agent: broker: %w", err)
	}
	b, err := broker.Start(brokerOptions(bc, tc, a.vars()), a.log)
	if err != nil {
		return nil, err
	}
	a.metrics.NewGauge("eddy_broker_too_large_total", func() float64 { return float64(b.TooLarge()) })
	a.metrics.NewGauge("eddy_broker_rejected_total", func() float64 { return float64(b.Rejected()) })
	a.metrics.NewGauge("eddy_broker_contained_panics_total", func() float64 { return float64(b.Panics()) })
	a.metrics.NewGauge("eddy_broker_throttled_total", func() float64 { return float64(b.Throttled()) })
	a.broker = b
	return b, nil
}

// brokerOptions are the options of the embedded broker of bc.
func brokerOptions(bc *config.Broker, tc *tls.Config, vars map[string]string) broker.Options {
	// Closed until run: the embedded sources subscribe while the agent is
	// built, and a publish before that would be acked and lost.
	return broker.Options{Listen: bc.Listen, Username: bc.Username, Password: bc.Password,
		TLS: tc, MaxInflight: bc.MaxInflight, MaxMessageSize: int(bc.MaxMessageSize), MaxClients: bc.MaxClients,
		MaxMessagesPerSecond: bc.MaxMessagesPerSecond, MaxMessagesBurst: bc.MaxMessagesBurst,
		ACLs: brokerACLs(bc, vars), Closed: true}
}

// sink returns the runner of s, creating it on first use.
func (a *Agent) sink(s *config.Sink) (*sinkRunner, error) {
	if r, ok := a.sinks[s.Name]; ok {
		return r, nil
	}
	failures := a.metrics.GetOrCreateCounter(fmt.Sprintf(`eddy_sink_failures_total{sink=%q}`, s.Name))
	r := newSinkRunner(s.Name, a.log, failures.Inc)
	r.fatal = a.fail
	var (
		sk  sink.Sink
		err error
	)
	switch {
	case s.File != nil && s.File.Delivery == config.ExactlyOnce:
		var tf *sink.TwoPhaseFile
		if tf, err = sink.OpenTwoPhaseFile(vfs.Default, a.dataPath(s.File.Path)); err == nil {
			tf.SetRetention(sink.PartRetention{MaxFiles: s.File.MaxFiles, MaxAge: s.File.MaxAge})
			r.tx = tf
		}
	case s.Stdout != nil:
		sk = sink.NewStdout(a.stdout, s.Stdout.Format == "pretty")
	case s.File != nil:
		sk, err = sink.NewFile(sink.FileOptions{Path: a.dataPath(s.File.Path), RotateSize: s.File.RotateSizeBytes})
	case s.MQTT != nil:
		m := s.MQTT
		url := m.Broker
		if url == config.Embedded {
			b, berr := a.embeddedBroker()
			if berr != nil {
				return nil, berr
			}
			url = b.URL()
		}
		r.maxPayload = int(m.MaxPayload)
		if m.UsesWAL() {
			r.tx, err = a.openWALSink(s, url)
			break
		}
		tc, terr := tlsConfig(m.TLS)
		if terr != nil {
			return nil, fmt.Errorf("agent: sink %q: %w", s.Name, terr)
		}
		qos := byte(m.QoS)
		if qos > 1 {
			qos = 1
		}
		if m.Delivery == config.AtMostOnce {
			qos = 0
		}
		sk, err = sink.NewMQTT(sink.MQTTOptions{Broker: url, ClientID: config.Expand(m.ClientID, a.vars()),
			Topic: m.Topic, QoS: qos, Retain: m.Retain, Username: m.Username, Password: m.Password, TLS: tc,
			DeviceID: a.deviceID}, a.log)
	default:
		err = errors.New("unknown sink type")
	}
	if err != nil {
		return nil, fmt.Errorf("agent: sink %q: %w", s.Name, err)
	}
	if r.tx == nil {
		r.plain = sk
	}
	a.sinks[s.Name] = r
	return r, nil
}

// openIngest opens the ingest log of a source under data_dir/ingest, with
// its redelivery filter rebuilt from the log's tail.
func (a *Agent) openIngest(name string, dopts ingest.DedupOptions) (*logIntake, error) {
	ic := a.cfg.Ingest
	l, err := ingest.Open(filepath.Join(a.cfg.Agent.DataDir, "ingest", name), ingestOptions(ic, a.log))
	if err != nil {
		return nil, fmt.Errorf("agent: source %q: %w", name, err)
	}
	d := ingest.NewDedup(dopts)
	if err := d.Load(l); err != nil {
		l.Close()
		return nil, fmt.Errorf("agent: source %q: %w", name, err)
	}
	a.logs = append(a.logs, l)
	dups := a.metrics.NewCounter(fmt.Sprintf(`eddy_ingest_redeliveries_dropped_total{source=%q}`, name))
	a.metrics.NewGauge(fmt.Sprintf(`eddy_ingest_log_bytes{source=%q}`, name), func() float64 { return float64(l.SizeBytes()) })
	a.metrics.NewGauge(fmt.Sprintf(`eddy_ingest_log_last_offset{source=%q}`, name), func() float64 { return float64(l.LastOffset()) })
	in := &logIntake{log: l, dedup: d, dedupOpts: dopts, logger: a.log, name: name, dups: dups.Inc, linger: ic.Linger, holds: &a.diskHolds}
	in.commitsMetric = a.metrics.NewCounter(fmt.Sprintf(`eddy_ingest_commits_total{source=%q}`, name))
	return in, nil
}

// ingestOptions are the options of every source's ingest log.
func ingestOptions(ic config.Ingest, log *slog.Logger) ingest.Options {
	seg := config.IngestSegmentBytes(ic.MaxDiskBytes)
	opts := ingest.Options{SyncInterval: ic.SyncInterval, MaxDiskBytes: ic.MaxDiskBytes, SegmentBytes: seg, Logger: log,
		Compress: ic.Compression != config.IngestCompressionNone}
	if ic.Ack == config.AckAfterWrite {
		opts.Ack = ingest.AfterWrite
	}
	return opts
}

// dataPath resolves a path from the configuration: relative paths are
// under data_dir, so a service started from / writes where its state is.
func (a *Agent) dataPath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(a.cfg.Agent.DataDir, p)
}

// openBackend opens the working state of one subtask. A bbolt file left by
// an earlier run is discarded, never trusted: state comes from the last
// checkpoint (docs/architecture.md "State").
func (a *Agent) openBackend(pipeline string, subtask, parallelism int) (state.Backend, error) {
	st := a.cfg.State
	if st.Backend == "memory" {
		return state.NewMemory(), nil
	}
	dir := filepath.Join(a.cfg.Agent.DataDir, "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: create %s: %w", dir, err)
	}
	n := a.totalSubtasks()
	be, err := state.OpenBolt(filepath.Join(dir, fmt.Sprintf("%s-%d.db", pipeline, subtask)), state.BoltOptions{
		MaxSize:    int(st.MaxSizeBytes / int64(n)),
		CacheBytes: int(a.memory.stateCache / int64(n)),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: pipeline %q subtask %d: %w", pipeline, subtask, err)
	}
	a.backends = append(a.backends, be)
	return be, nil
}

// totalSubtasks counts the subtasks with state (a window, per-key
// functions) of the configuration, which
// share the state budget (cache and max_size).
func (a *Agent) totalSubtasks() int {
	n := 0
	for _, p := range a.cfg.Pipelines {
		if p.Window == nil && !p.Keyed() {
			continue
		}
		if p.Parallelism > 0 {
			n += p.Parallelism
		} else {
			n += a.cfg.Agent.Parallelism
		}
	}
	return max(n, 1)
}

func tlsConfig(t *config.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	tc := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pool, err := readCAPool(t.CA)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if t.Cert != "" {
		c, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("load certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// brokerACLs are the broker's acl blocks with ${device_id} filled in
// (${username} is the broker's to fill per client).
func brokerACLs(bc *config.Broker, vars map[string]string) []broker.ACL {
	var acls []broker.ACL
	for _, c := range bc.ACLs {
		acl := broker.ACL{User: c.User}
		for _, f := range c.Publish {
			acl.Publish = append(acl.Publish, config.Expand(f, vars))
		}
		acls = append(acls, acl)
	}
	return acls
}

// brokerTLSConfig is the embedded broker's listener config: its own
// certificate and, with a CA, client certificates required and verified
// against that CA (a client without one, or with one from another CA, fails
// the handshake).
func brokerTLSConfig(t *config.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	return serverTLSConfig(t.Cert, t.Key, t.CA)
}

// serverTLSConfig is a listener's TLS config with certFile and keyFile;
// with clientCA, a client certificate issued by it is required and
// verified.
func serverTLSConfig(certFile, keyFile, clientCA string) (*tls.Config, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pool, err := readCAPool(clientCA)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// readCAPool reads a PEM CA bundle.
func readCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", path)
	}
	return pool, nil
}

func (a *Agent) run(ctx context.Context, opts Options) error {
	defer func() {
		if a.broker != nil {
			_ = a.broker.Close()
		}
		a.mu.Lock()
		for _, be := range a.backends {
			_ = be.Close()
		}
		a.mu.Unlock()
		for _, l := range a.logs {
			_ = l.Close()
		}
	}()
	if a.broker != nil {
		a.broker.Open() // every embedded source has subscribed (build)
	}
	defer a.closeAdmin()
	if err := a.setupCheckpoints(ctx); err != nil {
		return err
	}
	a.disk = newDiskMeter(a, fileSystemStats)
	a.disk.start(a.cfg, a.log)
	a.disk.register(a.metrics)
	diskCtx, stopDisk := context.WithCancel(context.Background())
	defer stopDisk()
	go a.disk.run(diskCtx)
	if err := a.startAdminOnce(); err != nil {
		return err
	}
	for _, s := range a.sinks {
		go s.run()
	}
	var pipeWG sync.WaitGroup
	for _, p := range a.pipelines {
		p.start(&pipeWG)
	}
	srcCtx, stopSources := context.WithCancel(context.Background())
	defer stopSources()
	var srcWG sync.WaitGroup
	for _, s := range a.sources {
		s.startIntake(srcCtx)
		s.start(srcCtx, a.log, &srcWG)
	}
	simCtx, stopSims := context.WithCancel(srcCtx)
	defer stopSims()
	for _, sim := range a.sims {
		go func() {
			if err := sim.Run(simCtx); err != nil && simCtx.Err() == nil {
				a.log.Error("simulator stopped", "err", err)
			}
		}()
	}
	ckptCtx, stopCkpt := context.WithCancel(context.Background())
	defer stopCkpt()
	upCtx, stopUpload := context.WithCancel(context.Background())
	defer stopUpload()
	if a.cfg.Upload != nil {
		if err := a.startUpload(upCtx, a.ckpt.store); err != nil {
			return err
		}
	}
	ckptErr := make(chan error, 1)
	ckptDone := make(chan struct{})
	go func() { ckptErr <- a.ckpt.run(ckptCtx); close(ckptDone) }()

	stopIntake := sync.OnceFunc(func() {
		// Stop taking readings in before letting go of the sources: the
		// embedded broker acks sensors in its publish hook, so it closes
		// first, or it would ack readings no pipeline is left to take.
		stopSims()
		if a.broker != nil {
			_ = a.broker.Close()
		}
		stopSources()
	})
	a.log.Info("eddy started", "version", opts.Version, "device_id", a.deviceID,
		"pipelines", len(a.pipelines), "sources", len(a.sources), "sinks", len(a.sinks))
	if opts.Ready != nil {
		opts.Ready(a)
	}

	// Run until every source has ended (files) or we are told to stop; a
	// failed region restarts meanwhile, the others running on.
	var (
		runErr   error
		gaveUp   bool
		stopping bool
	)
	drained := a.watchDrained(ctx)
	var idle <-chan struct{}
	for !stopping {
		select {
		case <-ctx.Done():
			a.log.Info("stopping: taking a final checkpoint")
			stopping = true
		case <-drained:
			// Every source has ended: wait for the queues to drain (a
			// failure meanwhile restarts its region, as before the end).
			drained, idle = nil, a.watchIdle(ctx)
		case <-idle:
			// A failure reported as the input ended is handled first.
			stopping = len(a.regionFailed) == 0
			idle = nil
		case runErr = <-ckptErr:
			a.log.Error("checkpoints keep failing: stopping", "err", runErr)
			stopping = true
		case runErr = <-a.failed:
			a.log.Error("stopping after a failure; the next start restores the last checkpoint", "err", runErr)
			stopping = true
		case f := <-a.regionFailed:
			if err := a.restartRegion(ctx, f, srcCtx, &srcWG, &pipeWG); err != nil {
				runErr, gaveUp, stopping = err, true, true
			}
			drained, idle = a.watchDrained(ctx), nil
		}
	}
	stopIntake()
	a.waitDrained()
	if runErr == nil {
		// The final checkpoint is aligned: let the queues drain first, so
		// a slow operator does not make it time out behind them.
		a.waitIdle(time.Minute + 2*a.cfg.Checkpoint.Timeout)
		// Everything taken in is in the pipelines: one last checkpoint
		// commits it, so a restart resumes exactly here. When the input
		// ended (not a signal), the output is complete only once it has
		// committed: it is tried again, and a run whose every try failed
		// exits with an error rather than report success (found under
		// load: an unaligned run's final checkpoint timed out behind the
		// replay of its in-flight records, and the job "finished" with its
		// last epoch uncommitted).
		tries := 1
		if ctx.Err() == nil {
			tries = finalCheckpointTries
		}
		if a.finalOnFullDisk(ctx) {
			tries = 0
		}
		for try := 1; try <= tries; try++ {
			err, failedLate := a.finalCheckpoint()
			if failedLate != nil {
				runErr = failedLate
				break
			}
			if err == nil {
				break
			}
			switch {
			case try < tries:
				a.log.Warn("final checkpoint failed; trying again", "err", err, "try", try, "of", tries)
			case ctx.Err() == nil:
				runErr = fmt.Errorf("the input ended but the final checkpoint failed %d times (%w): the output since the last completed checkpoint is not committed; the next start restores that checkpoint and produces it again", tries, err)
			default:
				a.log.Warn("final checkpoint failed; the next start restores the previous one", "err", err)
			}
		}
	}
	// No more checkpoints: the coordinator stops before the sources stop
	// taking barriers; then the final checkpoint, the newest, is shipped.
	stopCkpt()
	<-ckptDone
	// The final checkpoint committed the last results to the WAL sinks:
	// a run whose input ended is complete once they are upstream.
	a.drainWALSinks(ctx.Err() != nil)
	a.flushUpload()
	for _, s := range a.sources {
		if !s.stopped { // a region that gave up is stopped already
			close(s.ctrl)
		}
	}
	srcWG.Wait()
	pipeWG.Wait()
	var sinkWG sync.WaitGroup
	for _, s := range a.sinks {
		sinkWG.Add(1)
		go func() { defer sinkWG.Done(); s.closeWhenProducersDone() }()
	}
	sinkWG.Wait()
	a.ckpt.writers.Wait()
	a.ckpt.collectGarbage()
	var errs []error
	switch {
	case gaveUp:
		errs = append(errs, runErr)
	case runErr != nil:
		errs = append(errs, &runFailure{runErr})
	}
	for _, s := range a.sources {
		if s.err != nil {
			errs = append(errs, fmt.Errorf("source %q: %w", s.name, s.err))
		}
	}
	a.log.Info("eddy stopped")
	return errors.Join(errs...)
}

// finalCheckpointTries bounds the final checkpoint's tries at the end of
// the input.
const finalCheckpointTries = 3

// finalCheckpoint takes one final checkpoint, waiting up to twice the
// checkpoint timeout. A region that fails meanwhile (a full store as the
// last windows fire) never acknowledges it: the wait stops at once and
// failedLate is that failure. Too late to restart the region here; the run
// counts as failed (the next start restores).
func (a *Agent) finalCheckpoint() (err, failedLate error) {
	fctx, cancel := context.WithTimeout(context.Background(), 2*a.cfg.Checkpoint.Timeout)
	defer cancel()
	late := make(chan error, 1)
	watchDone, watchExited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchExited)
		select {
		case f := <-a.regionFailed:
			late <- f.err
			cancel()
		case <-watchDone:
		}
	}()
	err = a.ckpt.final(fctx)
	close(watchDone)
	<-watchExited
	select {
	case failedLate = <-late:
	case f := <-a.regionFailed:
		failedLate = f.err
	default:
	}
	return err, failedLate
}

// runFailure is a run that stopped because something failed (not a signal
// or the end of input): the restart strategy may run it again.
type runFailure struct{ err error }

func (f *runFailure) Error() string { return f.err.Error() }
func (f *runFailure) Unwrap() error { return f.err }

// fail stops the agent with err (the first one wins).
func (a *Agent) fail(err error) {
	select {
	case a.failed <- err:
	default:
	}
}

// AdminAddr is the admin endpoint's address, or "" when it is off.
func (a *Agent) AdminAddr() string {
	if a.admin == nil {
		return ""
	}
	return a.admin.Addr()
}

// PipelineStatus reports each pipeline's counters.
func (a *Agent) PipelineStatus() []pipelineStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []pipelineStatus
	for _, p := range a.pipelines {
		st := pipelineStatus{Name: p.name, ReadingsIn: p.m.in.Get(), ResultsOut: p.m.out.Get(),
			Filtered: p.m.filtered.Get(), Late: p.m.late.Get(), Unassigned: p.m.unassigned.Get(),
			DeadLettered: p.m.deadLetteredTotal(), Parallelism: len(p.subtasks)}
		if wm := p.m.watermark.Load(); wm != -1<<63 {
			st.WatermarkMs = &wm
		}
		out = append(out, st)
	}
	return out
}
