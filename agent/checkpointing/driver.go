package checkpointing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/checkpoint"
)

// Driver drives the checkpoint coordinator (a pure state machine) and
// does its I/O: it injects barriers at the sources, writes snapshot files
// asynchronously as subtasks hand over their state views, writes manifests,
// tells sinks to commit, and applies retention. One goroutine (Run) owns the
// coordinator; tasks talk to it through Send.
type Driver struct {
	coord *checkpoint.Coordinator
	store *checkpoint.Store
	// mergedTo: task → func(*checkpoint.Table), where the bases merged
	// from the task's files go (OnMerged).
	mergedTo sync.Map
	retain   int
	msgs     chan any // checkpoint.Message, savepointRequest, forceCheckpoint or regionChange
	sources  []Source
	txSinks  []TxSink
	// announce, if set, sends each trigger ahead to the window subtasks
	// (unaligned checkpoints), before the sources inject the barrier.
	announce func(checkpoint.Trigger)
	// inFlight counts the unaligned subtasks of a completed checkpoint and
	// their in-flight records, for its log line and history record.
	inFlight func(*checkpoint.Manifest) (tasks int, records uint64)
	// finalizing: the final checkpoint is aligned, so that it holds
	// everything taken in processed, with no in-flight records left over.
	finalizing atomic.Bool
	log        *slog.Logger
	monoMs     func() int64

	// offsetMs is added to the clock the coordinator sees: a final
	// checkpoint is forced by moving its time on by one interval.
	offsetMs int64
	interval time.Duration
	timeout  time.Duration // checkpoint { timeout }
	// maxSavepoints: checkpoint { max_savepoints }; 0 means no limit.
	maxSavepoints int
	// savepointSlots serializes the savepoint limit's count-and-take.
	savepointSlots sync.Mutex

	// holdWhileBlocked's state: since when a sink is blocked, and whether
	// that was logged.
	blockedSinceMs int64
	blockedLogged  bool

	// full is the store's full-disk state, which the coordinator mirrors
	// (checkpoint.Coordinator.DiskFull): Note on each failed write, Poll
	// on each tick.
	full *disk.Watch

	writers sync.WaitGroup // snapshot writes and chain merges in flight
	// runCtx is Run's context: chain merges stop when it ends.
	runCtx context.Context

	// trigActivity is activity() when the last checkpoint was triggered
	// (Run's goroutine only).
	trigActivity uint64
	// fullAtDone: an ingest log was full when the last checkpoint
	// completed, so the ingest log's truncation shrank it below that
	// checkpoint (Run's goroutine only; see ingestWaits).
	fullAtDone bool

	mu         sync.Mutex
	waiters    map[uint64]chan error // savepoint request → result
	nextReq    uint64
	completed  []func(checkpoint.Completed)
	lastDone   atomic.Uint64 // id of the last completed checkpoint
	lastTrig   atomic.Uint64 // id of the last triggered checkpoint
	idleTicks  atomic.Uint64 // ticks skipped because nothing changed (unchanged)
	completeCh chan uint64   // ids of completed or aborted checkpoints, for waiters
	// keepUnshipped, when uploads are on, returns how many of the newest
	// checkpoints retention must keep so that none waiting for upload
	// loses its files.
	keepUnshipped func() int
	history       []admin.CheckpointRecord

	mFailures  *metrics.Counter
	mCompleted *metrics.Counter
	lastDurMs  atomic.Int64
	lastSize   atomic.Int64
	lastFull   atomic.Int64
	lastAlign  atomic.Int64
}

// Config is what a Driver is handed. Store, Log, MonoMs and Metrics are
// required; the rest may be zero.
type Config struct {
	Store *checkpoint.Store
	// Retain is how many of the newest checkpoints retention keeps
	// (checkpoint { retain }); savepoints are never removed.
	Retain int
	// Interval is checkpoint { interval }: a final checkpoint is forced by
	// moving the coordinator's clock on by one.
	Interval time.Duration
	// Timeout is checkpoint { timeout }: a sink blocked for half of it is
	// logged once.
	Timeout time.Duration
	// MaxSavepoints is checkpoint { max_savepoints }; 0 means no limit.
	MaxSavepoints int
	Log           *slog.Logger
	// MonoMs is the monotonic clock in ms, which the coordinator runs on.
	MonoMs func() int64
	// Metrics gets the eddy_checkpoint* metrics.
	Metrics *metrics.Set
	// Sources get every barrier; TxSinks commit each completed checkpoint.
	// Both may change later with SuspendRegion and ResumeRegion.
	Sources []Source
	TxSinks []TxSink
	// Announce, if set, gets each trigger, except the final checkpoint's,
	// before the sources do (unaligned checkpoints); it must not block.
	Announce func(checkpoint.Trigger)
	// InFlight, if set, counts the subtasks of a completed checkpoint that
	// took its barrier unaligned and the in-flight records they stored.
	InFlight func(*checkpoint.Manifest) (tasks int, records uint64)
}

// New returns a Driver of coord, which it owns from now on, and registers
// its metrics in cfg.Metrics. Nothing runs until Run.
func New(coord *checkpoint.Coordinator, cfg Config) *Driver {
	c := &Driver{coord: coord, store: cfg.Store, retain: cfg.Retain, interval: cfg.Interval,
		timeout: cfg.Timeout, maxSavepoints: cfg.MaxSavepoints,
		sources: slices.Clone(cfg.Sources), txSinks: slices.Clone(cfg.TxSinks),
		announce: cfg.Announce, inFlight: cfg.InFlight,
		msgs: make(chan any, 1024), log: cfg.Log, monoMs: cfg.MonoMs,
		waiters: map[uint64]chan error{}, completeCh: make(chan uint64, 16)}
	c.full = disk.NewWatch(c.store.Dir(), c.log, c.monoMs, func(full bool) {
		c.coord.Tick(c.now())
		c.coord.DiskFull(full)
	})
	set := cfg.Metrics
	c.mFailures = set.NewCounter("eddy_checkpoint_failures_total")
	c.mCompleted = set.NewCounter("eddy_checkpoints_completed_total")
	set.NewGauge("eddy_checkpoint_last_duration_ms", func() float64 { return float64(c.lastDurMs.Load()) })
	set.NewGauge("eddy_checkpoint_last_size_bytes", func() float64 { return float64(c.lastSize.Load()) })
	set.NewGauge("eddy_checkpoint_last_full_size_bytes", func() float64 { return float64(c.lastFull.Load()) })
	set.NewGauge("eddy_checkpoint_last_alignment_ms", func() float64 { return float64(c.lastAlign.Load()) })
	set.NewGauge("eddy_checkpoint_last_completed_id", func() float64 { return float64(c.lastDone.Load()) })
	return c
}

// Send delivers a task's message (an acknowledgement or a failure) to the
// coordinator. It blocks only while 1024 messages wait for Run. Safe for
// concurrent use.
func (c *Driver) Send(m checkpoint.Message) { c.msgs <- m }

// OnCompleted registers fn to run on Run's goroutine after each completed
// checkpoint, after the sinks committed it and retention ran, in the order
// registered. Call it before Run.
func (c *Driver) OnCompleted(fn func(checkpoint.Completed)) {
	c.completed = append(c.completed, fn)
}

// KeepUnshipped makes retention keep at least fn() of the newest
// checkpoints (uploads: none waiting for upload loses its files). Call it
// before Run; fn runs on Run's goroutine.
func (c *Driver) KeepUnshipped(fn func() int) { c.keepUnshipped = fn }

// Store is the checkpoint store the Driver writes to.
func (c *Driver) Store() *checkpoint.Store { return c.store }

// Tick is how often Run offers the coordinator the time, which triggers a
// checkpoint once the interval has passed.
const Tick = 50 * time.Millisecond

// Run drives the coordinator until ctx ends. It returns the coordinator's
// failure (too many failed checkpoints in a row), or nil. Call it once.
func (c *Driver) Run(ctx context.Context) error {
	c.runCtx = ctx
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for {
		var forced chan struct{}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			c.holdWhileBlocked()
			c.full.Poll(c.lastSize.Load())
			if c.unchanged() {
				c.idleTicks.Add(1)
				continue
			}
			c.coord.Tick(c.now())
			if c.ingestWaits() {
				c.coord.Hurry()
			}
		case m := <-c.msgs:
			var msg checkpoint.Message
			switch m := m.(type) {
			case savepointRequest:
				c.mu.Lock()
				c.waiters[m.id] = m.done
				c.mu.Unlock()
				msg = checkpoint.TriggerSavepoint{Request: m.id}
			case forceCheckpoint:
				c.offsetMs += c.interval.Milliseconds()
				c.coord.Tick(c.now())
				forced = m.done
			case regionChange:
				c.changeRegion(m)
				forced = m.done
			case checkpoint.Message:
				msg = m
			}
			switch m := msg.(type) {
			case checkpoint.Failure:
				c.full.Note(m.Err)
			case checkpoint.Compacted:
				c.full.Note(m.Err)
			}
			if msg != nil {
				// Durations are measured on the coordinator's clock: tell it
				// the time before each message, not only every tick.
				c.coord.Tick(c.now())
				if err := c.coord.Step(msg); err != nil {
					c.log.Error("checkpoint protocol error", "err", err)
				}
			}
		}
		for c.coord.HasReady() {
			c.handle(c.coord.Ready())
			c.coord.Advance()
		}
		if forced != nil {
			close(forced) // after the trigger, if any, went out
		}
		if err := c.coord.Failed(); err != nil {
			return err
		}
	}
}

func (c *Driver) now() int64 { return c.monoMs() + c.offsetMs }

func (c *Driver) handle(rd checkpoint.Ready) {
	for _, tr := range rd.Triggers {
		c.lastTrig.Store(tr.ID)
		// Before the barriers go out: what is counted after this belongs
		// to this checkpoint or a later one, so at worst one checkpoint too
		// many is taken, never one too few.
		c.trigActivity = c.activity()
		c.log.Debug("checkpoint triggered", "id", tr.ID, "kind", tr.Kind)
		if c.announce != nil && !c.finalizing.Load() {
			c.announce(tr) // first: a source may be blocked behind backpressure
		}
		for _, s := range c.sources {
			s.InjectBarrier(tr)
		}
	}
	if m := rd.Manifest; m != nil {
		m.Time = time.Now().UTC()
		if err := c.store.WriteManifest(m); err != nil {
			c.log.Error("writing checkpoint manifest failed", "id", m.ID, "err", err)
			c.full.Note(err)
			if serr := c.coord.Step(checkpoint.Failure{CheckpointID: m.ID, Err: err}); serr != nil {
				c.log.Error("checkpoint protocol error", "err", serr)
			}
		}
	}
	for _, done := range rd.Completed {
		c.complete(done)
	}
	if rd.Compaction != nil {
		c.mergeChains(rd.Compaction)
	}
	for _, ab := range rd.Aborted {
		full := c.coord.IsDiskFull()
		if !full {
			c.mFailures.Inc()
		}
		c.log.Warn("checkpoint aborted", "id", ab.ID, "kind", ab.Kind, "reason", ab.Reason, "disk_full", full)
		c.Record(admin.CheckpointRecord{ID: ab.ID, Kind: ab.Kind.String(), Time: time.Now().UTC().Format(time.RFC3339Nano), Aborted: ab.Reason.Error(), DiskFull: full})
		c.answer(ab.SavepointRequest, fmt.Errorf("savepoint %d aborted: %w", ab.ID, ab.Reason))
		c.notify(ab.ID)
	}
}

func (c *Driver) complete(done checkpoint.Completed) {
	m := done.Manifest
	// The commit phase: output of epochs ≤ id becomes visible.
	for _, s := range c.txSinks {
		s.Commit(done.ID)
	}
	c.mCompleted.Inc()
	if done.Kind != checkpoint.KindSavepoint {
		c.fullAtDone = c.ingestFull()
	}
	c.lastDone.Store(done.ID)
	c.lastDurMs.Store(m.DurationMs)
	c.lastSize.Store(m.Size())
	c.lastFull.Store(m.FullSize())
	c.lastAlign.Store(m.AlignmentMs)
	var unaligned int
	var inflight uint64
	if c.inFlight != nil {
		unaligned, inflight = c.inFlight(m)
	}
	c.log.Info("checkpoint completed", "id", done.ID, "kind", done.Kind, "duration_ms", m.DurationMs,
		"bytes", m.Size(), "chain_bytes", m.FullSize(), "unaligned_tasks", unaligned, "inflight_records", inflight)
	c.Record(admin.CheckpointRecord{ID: done.ID, Kind: done.Kind.String(), Time: m.Time.Format(time.RFC3339Nano),
		SizeBytes: m.Size(), FullBytes: m.FullSize(), DurationMs: m.DurationMs, AlignmentMs: m.AlignmentMs, Files: len(m.Files),
		UnalignedTasks: unaligned, InFlightRecords: inflight})
	retain := c.retain
	if c.keepUnshipped != nil {
		retain = max(retain, c.keepUnshipped())
	}
	if plan, err := c.store.Retain(retain); err != nil {
		c.log.Warn("checkpoint retention failed", "err", err)
	} else if len(plan.Manifests) > 0 {
		c.log.Debug("checkpoint retention", "removed", plan.Manifests, "files", len(plan.Files))
	}
	for _, fn := range c.completed {
		fn(done)
	}
	c.answer(done.SavepointRequest, nil)
	c.notify(done.ID)
}

func (c *Driver) notify(id uint64) {
	select {
	case c.completeCh <- id:
	default:
	}
}

type forceCheckpoint struct{ done chan struct{} }

// regionChange, on suspend, stops checkpoints while a failover region
// restarts (the one in progress is aborted: the region's tasks will not
// acknowledge it) and detaches the region's sources and transactional
// sinks; otherwise it attaches the restarted region's and resumes.
type regionChange struct {
	suspend bool
	reason  error
	sources []Source
	txSinks []TxSink
	done    chan struct{}
}

// changeRegion applies rc on the run goroutine.
func (c *Driver) changeRegion(rc regionChange) {
	if rc.suspend {
		c.coord.Tick(c.now())
		c.coord.Suspend(rc.reason)
		c.sources = slices.DeleteFunc(c.sources, func(s Source) bool { return slices.Contains(rc.sources, s) })
		c.txSinks = slices.DeleteFunc(c.txSinks, func(s TxSink) bool { return slices.Contains(rc.txSinks, s) })
		return
	}
	c.sources = append(c.sources, rc.sources...)
	c.txSinks = append(c.txSinks, rc.txSinks...)
	c.coord.Tick(c.now())
	c.coord.Resume()
}

// SuspendRegion stops checkpoints while a failover region restarts: the
// checkpoint in progress is aborted with reason (the region's tasks will
// not acknowledge it), none is triggered until ResumeRegion, and sources
// and txSinks (the region's) get no more barriers or commits. It returns
// once Run has applied it; Run must be running.
func (c *Driver) SuspendRegion(reason error, sources []Source, txSinks []TxSink) {
	c.changeRegions(regionChange{suspend: true, reason: reason, sources: sources, txSinks: txSinks})
}

// ResumeRegion attaches a restarted region's sources and txSinks and
// resumes checkpoints. It returns once Run has applied it; Run must be
// running.
func (c *Driver) ResumeRegion(sources []Source, txSinks []TxSink) {
	c.changeRegions(regionChange{sources: sources, txSinks: txSinks})
}

// changeRegions hands rc to the run goroutine and waits until it is done.
func (c *Driver) changeRegions(rc regionChange) {
	rc.done = make(chan struct{})
	c.msgs <- rc
	<-rc.done
}

// Final takes one more checkpoint, triggered now and aligned, and waits
// until it (or a later one) completes, ctx ends, or twice the interval
// plus a minute passes. Used at shutdown and at the end of input, after
// the sources have stopped, so the checkpoint holds everything taken in.
func (c *Driver) Final(ctx context.Context) error {
	c.finalizing.Store(true)
	want := c.lastTrig.Load() + 1
	deadline := time.After(2*c.interval + time.Minute)
	for c.lastDone.Load() < want {
		if c.lastTrig.Load() < want {
			f := forceCheckpoint{done: make(chan struct{})}
			select {
			case c.msgs <- f:
				// The coordinator's loop may have ended meanwhile (too many
				// failures): then nothing closes done, so the wait is bounded
				// by ctx too (a SIGTERM while checkpoints kept failing hung
				// here).
				select {
				case <-f.done:
				case <-ctx.Done():
					return ctx.Err()
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			if c.lastTrig.Load() < want {
				// One was in progress: wait for it to end, then force again.
				select {
				case <-c.completeCh:
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
		}
		select {
		case <-c.completeCh:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			return errors.New("agent: final checkpoint did not complete in time")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
