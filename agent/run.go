package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eddy-edge/eddy/agent/checkpointing"
	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/agent/failover"
)

func (a *Agent) run(ctx context.Context, opts Options) error {
	defer a.closeStores()
	if a.flow.broker != nil {
		a.flow.broker.Open() // every embedded source has subscribed (build)
	}
	defer a.endpoint.close()
	if err := a.setupCheckpoints(ctx); err != nil {
		return err
	}
	defer a.startDiskMeter()()
	if err := a.endpoint.startOnce(); err != nil {
		return err
	}
	r, err := a.startStages()
	defer r.cancel()
	if err != nil {
		return err
	}
	a.log.Info("eddy started", "version", opts.Version, "device_id", a.deviceID,
		"pipelines", len(a.flow.pipelines), "sources", len(a.flow.sources), "sinks", len(a.flow.sinks))
	if opts.Ready != nil {
		opts.Ready(a)
	}
	runErr, gaveUp := a.supervise(ctx, r)
	r.stopIntake()
	a.flow.waitDrained()
	if runErr == nil {
		runErr = a.commitFinal(ctx)
	}
	undelivered := a.shutdown(ctx, r)
	err = a.exitError(ctx, runErr, gaveUp, undelivered)
	a.log.Info("eddy stopped")
	return err
}

// closeStores closes, when run returns, what build opened: the embedded
// broker, the state backends and the ingest logs.
func (a *Agent) closeStores() {
	for _, r := range a.flow.rebirthers {
		r.close()
	}
	if a.flow.broker != nil {
		_ = a.flow.broker.Close()
	}
	a.flow.mu.Lock()
	for _, be := range a.flow.backends {
		_ = be.Close()
	}
	a.flow.mu.Unlock()
	for _, l := range a.flow.logs {
		_ = l.Close()
	}
}

// startDiskMeter starts the eddy_disk_* gauges and the budget's sampling;
// the returned func stops the sampling.
func (a *Agent) startDiskMeter() (stop func()) {
	meter := disk.NewMeter(a.cfg.Agent.DataDir, fileSinkPaths(a.cfg), disk.FileSystemStats, &a.diskHolds, a.log)
	meter.Start(a.cfg.Agent.MaxDiskBytes, a.cfg.DiskShares())
	meter.Register(a.metrics)
	a.diskMeter.Store(meter)
	ctx, cancel := context.WithCancel(context.Background())
	go meter.Run(ctx)
	return cancel
}

// started is what startStages started and shutdown stops: the contexts and
// wait groups of the sources, pipelines, simulators, the checkpoint loop
// and the uploader.
type started struct {
	srcCtx        context.Context
	srcWG, pipeWG sync.WaitGroup
	stopSources   context.CancelFunc
	stopSims      context.CancelFunc
	stopCkpt      context.CancelFunc
	stopUpload    context.CancelFunc
	ckptErr       chan error    // the checkpoint loop gave up
	ckptDone      chan struct{} // the checkpoint loop returned
	stopIntake    func()        // stops taking readings in, once
}

// cancel releases every context of r (idempotent).
func (r *started) cancel() {
	for _, c := range []context.CancelFunc{r.stopSims, r.stopSources, r.stopCkpt, r.stopUpload} {
		if c != nil {
			c()
		}
	}
}

// startStages starts the sinks, then the pipelines, then the sources and
// simulators, then the uploader and the checkpoint loop.
func (a *Agent) startStages() (*started, error) {
	r := &started{ckptErr: make(chan error, 1), ckptDone: make(chan struct{})}
	for _, s := range a.flow.sinks {
		go s.run()
	}
	for _, p := range a.flow.pipelines {
		p.Start(&r.pipeWG)
	}
	r.srcCtx, r.stopSources = context.WithCancel(context.Background())
	for _, s := range a.flow.sources {
		s.startIntake(r.srcCtx)
		s.start(r.srcCtx, a.log, &r.srcWG)
	}
	var simCtx context.Context
	simCtx, r.stopSims = context.WithCancel(r.srcCtx)
	for _, sim := range a.flow.sims {
		go func() {
			if err := sim.Run(simCtx); err != nil && simCtx.Err() == nil {
				a.log.Error("simulator stopped", "err", err)
			}
		}()
	}
	ckptCtx, stopCkpt := context.WithCancel(context.Background())
	r.stopCkpt = stopCkpt
	var upCtx context.Context
	upCtx, r.stopUpload = context.WithCancel(context.Background())
	if a.cfg.Upload != nil {
		t, err := uploadTarget(a.cfg, "", "")
		if err != nil {
			return r, err
		}
		if err := a.upload.Start(upCtx, t, a.ckpt.Store(), a.ckpt, a.metrics, a.log); err != nil {
			return r, err
		}
	}
	go func() { r.ckptErr <- a.ckpt.Run(ckptCtx); close(r.ckptDone) }()
	r.stopIntake = sync.OnceFunc(func() {
		// Stop taking readings in before letting go of the sources: the
		// embedded broker acks sensors in its publish hook, so it closes
		// first, or it would ack readings no pipeline is left to take.
		r.stopSims()
		if a.flow.broker != nil {
			_ = a.flow.broker.Close()
		}
		r.stopSources()
	})
	return r, nil
}

// supervise runs until every source has ended (files) or ctx is done, a
// failed region restarting meanwhile, the others running on. It returns
// why the run stops: nil for the end of input or a signal; gaveUp when a
// region's restarts ran out.
func (a *Agent) supervise(ctx context.Context, r *started) (runErr error, gaveUp bool) {
	drained := a.flow.watchDrained(ctx)
	var idle <-chan struct{}
	for {
		select {
		case <-ctx.Done():
			a.log.Info("stopping: taking a final checkpoint")
			return nil, false
		case <-drained:
			// Every source has ended: wait for the queues to drain (a
			// failure meanwhile restarts its region, as before the end).
			drained, idle = nil, a.flow.watchIdle(ctx)
		case <-idle:
			// A failure reported as the input ended is handled first.
			if len(a.failover.Failed()) == 0 {
				return nil, false
			}
			idle = nil
		case err := <-r.ckptErr:
			a.log.Error("checkpoints keep failing: stopping", "err", err)
			return err, false
		case err := <-a.failed:
			a.log.Error("stopping after a failure; the next start restores the last checkpoint", "err", err)
			return err, false
		case f := <-a.failover.Failed():
			if err := a.failover.Restart(ctx, regionHost{a: a, st: r}, f); err != nil {
				return err, true
			}
			drained, idle = a.flow.watchDrained(ctx), nil
		}
	}
}

// commitFinal takes the final checkpoint once the queues drained, so a
// restart resumes exactly here.
//
// When the input ended (not a signal), the output is complete only once
// it has committed: it is tried again, and a run whose every try failed
// exits with an error rather than report success (found under load: an
// unaligned run's final checkpoint timed out behind the replay of its
// in-flight records, and the job "finished" with its last epoch
// uncommitted).
func (a *Agent) commitFinal(ctx context.Context) error {
	// The final checkpoint is aligned: let the queues drain first, so a
	// slow operator does not make it time out behind them.
	a.flow.waitIdle(time.Minute + 2*a.cfg.Checkpoint.Timeout)
	tries := 1
	if ctx.Err() == nil {
		tries = finalCheckpointTries
	}
	if a.finalOnFullDisk(ctx) {
		tries = 0
	}
	for try := 1; try <= tries; try++ {
		late, err := a.finalCheckpoint()
		if late != nil {
			return a.lateFailure(ctx, late)
		}
		if err == nil {
			return nil
		}
		switch {
		case try < tries:
			a.log.Warn("final checkpoint failed; trying again", "err", err, "try", try, "of", tries)
		case ctx.Err() == nil:
			return fmt.Errorf("the input ended but the final checkpoint failed %d times (%w): the output since the last completed checkpoint is not committed; the next start restores that checkpoint and produces it again", tries, err)
		default:
			a.log.Warn("final checkpoint failed; the next start restores the previous one", "err", err)
		}
	}
	return nil
}

// shutdown stops what startStages started, in order, and returns how many
// results the WAL sinks could not deliver: no more checkpoints, the
// newest one shipped, the sources closed, the pipelines and sinks drained.
func (a *Agent) shutdown(ctx context.Context, r *started) (undelivered int64) {
	// The coordinator stops before the sources stop taking barriers; then
	// the final checkpoint, the newest, is shipped.
	r.stopCkpt()
	<-r.ckptDone
	// The final checkpoint committed the last results to the WAL sinks:
	// a run whose input ended is complete once they are upstream.
	undelivered = a.flow.drainWALSinks(ctx)
	a.upload.Flush()
	for _, s := range a.flow.sources {
		if !s.stopped { // a region that gave up is stopped already
			close(s.ctrl)
		}
	}
	r.srcWG.Wait()
	r.pipeWG.Wait()
	var sinkWG sync.WaitGroup
	for _, s := range a.flow.sinks {
		sinkWG.Add(1)
		go func() { defer sinkWG.Done(); s.closeWhenProducersDone() }()
	}
	sinkWG.Wait()
	a.ckpt.WaitWriters()
	a.ckpt.CollectGarbage()
	return undelivered
}

// exitError is run's result: why it stopped, the sources' own errors,
// and, when the input ended, results the WAL sinks could not deliver.
func (a *Agent) exitError(ctx context.Context, runErr error, gaveUp bool, undelivered int64) error {
	var errs []error
	switch {
	case gaveUp:
		errs = append(errs, runErr)
	case runErr != nil:
		rf, ok := runErr.(*runFailure) // from lateFailure
		if !ok {
			rf = &runFailure{err: runErr}
		}
		errs = append(errs, rf)
	}
	for _, s := range a.flow.sources {
		if s.err != nil {
			errs = append(errs, fmt.Errorf("source %q: %w", s.name, s.err))
		}
	}
	if undelivered > 0 && ctx.Err() == nil && len(errs) == 0 {
		// The input ended: the run's output is incomplete upstream.
		errs = append(errs, undeliveredError(undelivered))
	}
	return errors.Join(errs...)
}

// finalCheckpointTries bounds the final checkpoint's tries at the end of
// the input.
const finalCheckpointTries = 3

// finalCheckpoint takes one final checkpoint, waiting up to twice the
// checkpoint timeout. A region that fails meanwhile (a full store as the
// last windows fire) never acknowledges it: the wait stops at once and
// late is that failure. Too late to restart the region here; the run
// counts as failed (the next start restores; see lateFailure).
func (a *Agent) finalCheckpoint() (late *failover.Failure, err error) {
	fctx, cancel := context.WithTimeout(context.Background(), 2*a.cfg.Checkpoint.Timeout)
	defer cancel()
	lateCh := make(chan failover.Failure, 1)
	watchDone, watchExited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchExited)
		select {
		case f := <-a.failover.Failed():
			lateCh <- f
			cancel()
		case <-watchDone:
		}
	}()
	err = a.ckpt.Final(fctx)
	close(watchDone)
	<-watchExited
	select {
	case f := <-lateCh:
		late = &f
	case f := <-a.failover.Failed():
		late = &f
	default:
	}
	return late, err
}

// lateFailure is the run's error after region failure f broke the final
// checkpoint. A full file system is waited out first, here, with the admin
// endpoint up (/readyz: disk_full with the path): the run then ends as a
// runFailure the restart loop runs again at once, not counted by the
// restart strategy, and the restart restores the last checkpoint and
// produces its output again. Anything else (or a stop while waiting) is
// an ordinary failure.
func (a *Agent) lateFailure(ctx context.Context, f *failover.Failure) error {
	short, full := disk.ShortageOf(f.Err, a.cfg.Agent.DataDir)
	if !full || ctx.Err() != nil {
		return f.Err
	}
	a.diskHolds.WaitRegion(ctx, a.log, f.Region().Name, short, f.Err)
	if ctx.Err() != nil {
		return f.Err
	}
	return &runFailure{err: f.Err, waitedForSpace: true}
}

// runFailure is a run that stopped because something failed (not a signal
// or the end of input): the restart strategy may run it again.
type runFailure struct {
	err error
	// waitedForSpace: the run failed for a full disk and waited until space
	// freed; the restart is not counted by the restart strategy.
	waitedForSpace bool
}

func (f *runFailure) Error() string { return f.err.Error() }

func (f *runFailure) Unwrap() error { return f.err }

// finalOnFullDisk decides the final checkpoint while the checkpoint
// store's disk is full. At the end of the input it waits for space (the
// output is complete only once the final checkpoint commits) and returns
// false, to take it; when stopping on a signal, or told to stop while
// waiting, it says in one line which checkpoint the next start restores
// and returns true: no final checkpoint is tried (it would fail the same
// way), and the agent exits cleanly.
func (a *Agent) finalOnFullDisk(ctx context.Context) bool {
	reason := a.ckpt.DiskFullReason()
	if reason == "" {
		return false
	}
	if ctx.Err() == nil {
		a.log.Warn("disk full: the final checkpoint waits until space frees", "err", reason)
		t := time.NewTicker(checkpointing.Tick)
		defer t.Stop()
		for reason != "" && ctx.Err() == nil {
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			reason = a.ckpt.DiskFullReason()
		}
		if reason == "" {
			return false
		}
	}
	next := "starts empty (no checkpoint completed)"
	if id := max(a.ckpt.LastCompleted(), a.restoredID); id > 0 {
		next = fmt.Sprintf("restores checkpoint %d, the last that completed", id)
	}
	a.log.Warn("stopping with the disk full: no final checkpoint; the next start "+next, "err", reason)
	return true
}
