package checkpoint

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Reasons a checkpoint is aborted; Aborted.Reason wraps one of them.
var (
	// ErrTimeout: not every task acknowledged within Config.Timeout.
	ErrTimeout = errors.New("checkpoint: timed out")
	// ErrDeclined: a task declined the checkpoint (Decline).
	ErrDeclined = errors.New("checkpoint: declined")
	// ErrFailed: a task or the agent reported a failure (Failure), such as a
	// snapshot or manifest write that failed.
	ErrFailed = errors.New("checkpoint: failed")
	// ErrBadAck: an acknowledgement broke the protocol (wrong files, a
	// source position or extra key reported twice). It is a bug in the agent.
	ErrBadAck = errors.New("checkpoint: bad acknowledgement")
	// ErrCoordinatorFailed: a savepoint was requested after the coordinator
	// failed.
	ErrCoordinatorFailed = errors.New("checkpoint: coordinator failed")
)

// Config configures a Coordinator. Start from DefaultConfig: the zero value
// is invalid.
type Config struct {
	// Interval between checkpoint starts (trigger to trigger). Positive;
	// default 10s.
	Interval time.Duration
	// MinPause is the least time between the end of one checkpoint
	// (completed or aborted) and the start of the next, so a slow disk is not
	// kept permanently busy. Zero or positive; default 0.
	MinPause time.Duration
	// Timeout aborts a checkpoint that not every task has acknowledged this
	// long after its trigger. Positive; default 1m.
	Timeout time.Duration
	// MaxConcurrent checkpoints in progress; only 1 is supported (0 means 1).
	MaxConcurrent int
	// TolerableFailures is how many checkpoints in a row may fail before
	// Failed reports ErrTooManyFailures. Zero fails on the first failure;
	// default 3 (not Flink's 0: a slow SD card must not kill the agent).
	// Savepoint failures are not counted.
	TolerableFailures int
	// Mode is handed to tasks with each trigger; the coordinator itself
	// behaves the same in both. Default ExactlyOnce.
	Mode Mode
	// MaxChainRatio bounds a chain by bytes: a periodic checkpoint is
	// incremental while the increments of the last completed checkpoint's
	// chain add up to at most MaxChainRatio × its base (the full files),
	// and full once they add up to more. So a restore reads at most about
	// (1 + MaxChainRatio) × the state plus one increment, and bytes written
	// per hour follow the change rate, not the state size: with ratio r a
	// base is rewritten once every r × base bytes of increments. 0 makes
	// every checkpoint full. Zero or positive; default 1.
	MaxChainRatio float64
	// FullEvery, if positive, also makes a checkpoint full once FullEvery-1
	// incremental ones followed the last full one (1 makes all full). 0
	// (default) leaves the decision to MaxChainRatio alone. Kept for
	// configs written before MaxChainRatio.
	FullEvery int
	// MergeChains, when the chain outgrows MaxChainRatio, asks the agent
	// for a new base built in the background (Ready.Compaction, answered by
	// Compacted) instead of triggering a full checkpoint: the barriers go
	// on being incremental and never wait for the live state to be read.
	// A failed merge makes the next checkpoint full.
	MergeChains bool
	// MinMergeBase, with MergeChains, keeps merges to chains whose base is
	// at least this many bytes: a smaller chain whose increments add up to
	// its base or more is replaced by a full checkpoint instead. A merge
	// reads the base and every increment (twice the base or more) to write
	// a new base, a full snapshot reads the live state once to write about
	// the same bytes, and a small state's barrier copy is cheap: at
	// checkpoints every second that halves the checkpoint's CPU. 0 merges
	// every chain.
	MinMergeBase int64
	// Tasks are the ids of the tasks that must acknowledge every checkpoint.
	// At least one; unique and non-empty.
	Tasks []string
	// ConfigFingerprint is copied into every manifest.
	ConfigFingerprint string
}

// DefaultMinMergeBase is the agent's Config.MinMergeBase: a base of up to
// 256 KiB (compressed; about a megabyte of state) is cheaper to take anew
// than to merge, and its barrier copy stays a fraction of a millisecond.
const DefaultMinMergeBase = 256 << 10

// DefaultConfig returns the defaults of the checkpoint block for the
// given tasks.
func DefaultConfig(tasks ...string) Config {
	return Config{Interval: 10 * time.Second, Timeout: time.Minute, MaxConcurrent: 1, TolerableFailures: 3, Mode: ExactlyOnce, MaxChainRatio: 1, Tasks: tasks}
}

// Validate reports what NewCoordinator would refuse in c.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Interval < time.Millisecond:
		return bad("interval %v must be at least 1ms", c.Interval)
	case c.Timeout < time.Millisecond:
		return bad("timeout %v must be at least 1ms", c.Timeout)
	case c.MinPause < 0:
		return bad("min_pause %v is negative", c.MinPause)
	case c.MaxConcurrent != 0 && c.MaxConcurrent != 1:
		return bad("max_concurrent %d: only 1 is supported", c.MaxConcurrent)
	case c.TolerableFailures < 0:
		return bad("tolerable_failures %d is negative", c.TolerableFailures)
	case c.Mode != ExactlyOnce && c.Mode != AtLeastOnce:
		return bad("mode %v", c.Mode)
	case !(c.MaxChainRatio >= 0) || math.IsInf(c.MaxChainRatio, 1):
		return bad("max_chain_ratio %v must be zero or a finite positive number", c.MaxChainRatio)
	case c.FullEvery < 0:
		return bad("full_every %d is negative", c.FullEvery)
	case c.MinMergeBase < 0:
		return bad("min_merge_base %d is negative", c.MinMergeBase)
	case len(c.Tasks) == 0:
		return bad("no tasks")
	}
	for i, t := range c.Tasks {
		if t == "" || slices.Contains(c.Tasks[:i], t) {
			return bad("task %q is empty or repeated", t)
		}
	}
	return nil
}

// Message is an input to Coordinator.Step: Ack, Decline, Failure or
// TriggerSavepoint.
type Message interface{ isMessage() }

// Ack is a task's acknowledgement of checkpoint CheckpointID: its snapshot
// files are durable in the Store (written with Store.WriteSnapshot, which
// syncs them) and it has forwarded the barrier.
type Ack struct {
	CheckpointID uint64
	Task         string
	// Files are the snapshot files this task wrote for this checkpoint, in
	// apply order; each has Checkpoint == CheckpointID and Task == Task.
	// If the first is KindFull they replace the task's chain, otherwise they
	// extend it (an incremental checkpoint; a task may answer one with a full
	// file when its deltas outweigh its base). A full checkpoint or savepoint
	// takes only full files. None is fine for a stateless task.
	Files []FileRef
	// Positions are the source positions (ingest-log offsets) of a source
	// task at the barrier, by source name.
	Positions map[string]uint64
	// Extra is opaque data for the manifest; keys must be unique across
	// tasks (prefix them with the task id).
	Extra map[string][]byte
	// AlignmentMs is how long the task's inputs were blocked for alignment.
	AlignmentMs int64
}

// Decline says a task cannot take checkpoint CheckpointID (for example it
// received a newer barrier first, or is still restoring). The checkpoint is
// aborted and counts as a failure.
type Decline struct {
	CheckpointID uint64
	Task         string
	Reason       string
}

// Failure reports that checkpoint CheckpointID failed at a task (its snapshot
// write failed) or, with Task empty, in the agent (the manifest write
// failed). The checkpoint is aborted and counts as a failure.
type Failure struct {
	CheckpointID uint64
	Task         string
	Err          error
}

// TriggerSavepoint requests a savepoint. It is triggered at once, or queued
// until the checkpoint in progress ends and then triggered as that one
// completes or aborts, without waiting for a Tick. Request is echoed in the Trigger and
// in the Completed or Aborted entry so the caller can answer the requester.
type TriggerSavepoint struct {
	Request uint64
}

func (Ack) isMessage()              {}
func (Decline) isMessage()          {}
func (Failure) isMessage()          {}
func (TriggerSavepoint) isMessage() {}
func (Compacted) isMessage()        {}

// Compaction asks the agent to merge, for each task in Chains, its chain of
// checkpoint Through into one full file (Store.MergeChain with id Through),
// in the background, and to Step a Compacted with the result.
type Compaction struct {
	Through uint64
	// Chains are, by task, the files to merge in apply order: tasks whose
	// chain has increments.
	Chains map[string][]FileRef
}

// Compacted answers a Compaction: Files are the merged bases by task, or
// Err says why the merge failed. A merged base takes its chain's place in
// the manifests of the checkpoints that complete after it (so it replaces
// the chain only once such a manifest is durable); the manifests before
// keep their files until retention drops them.
type Compacted struct {
	Through uint64
	Files   map[string]FileRef
	Err     error
}

// Trigger tells the agent to start checkpoint ID: every source records its
// position and injects barrier ID with this Kind.
type Trigger struct {
	ID   uint64
	Kind Kind // KindFull, KindIncremental or KindSavepoint
	// Parent is, for KindIncremental, the checkpoint the deltas are relative
	// to: each task's increment must hold every change since its snapshot
	// for Parent (deltas of aborted checkpoints and savepoints in between
	// included). Zero otherwise.
	Parent uint64
	Mode   Mode
	// SavepointRequest is the TriggerSavepoint.Request of a savepoint.
	SavepointRequest uint64
}

// Completed reports a checkpoint whose manifest is durable: the agent
// notifies sinks (the commit phase) and may run retention and upload.
type Completed struct {
	ID               uint64
	Kind             Kind
	SavepointRequest uint64
	Manifest         *Manifest
}

// Aborted reports a checkpoint that will never complete: tasks discard what
// they prepared for it (a sink keeps its pre-committed output for the next
// checkpoint). Its files may stay on disk until Store.CollectGarbage.
type Aborted struct {
	ID               uint64
	Kind             Kind
	SavepointRequest uint64
	Reason           error // wraps ErrTimeout, ErrDeclined, ErrFailed, ErrBadAck or ErrCoordinatorFailed
}

// Ready is the work the agent must do, in this order:
//
//  1. Triggers: inject each barrier at every source.
//  2. Manifest: if non-nil, every task has acknowledged; set its Time to the
//     wall clock and write it durably (Store.WriteManifest: temp file, fsync,
//     rename, fsync dir). If that fails, Step(Failure{CheckpointID: ID}) before
//     Advance and the checkpoint is aborted; otherwise it completes in
//     Advance and is reported in the next Ready's Completed.
//  3. Completed: notify sinks that these checkpoints completed (commit).
//  4. Aborted: tell tasks these checkpoints are abandoned.
//
// Then call Advance.
//
// A Compaction, if non-nil, is started in the background at any point.
type Ready struct {
	Triggers   []Trigger
	Manifest   *Manifest
	Completed  []Completed
	Aborted    []Aborted
	Compaction *Compaction
}

func (rd *Ready) empty() bool {
	return len(rd.Triggers) == 0 && rd.Manifest == nil && len(rd.Completed) == 0 && len(rd.Aborted) == 0 && rd.Compaction == nil
}

// Stats are counters for metrics.
type Stats struct {
	Triggered, Completed, Aborted uint64
	// ConsecutiveFailures counts checkpoints failed since the last completion.
	ConsecutiveFailures int
	// InProgress is the id of the checkpoint in progress, 0 if none.
	InProgress      uint64
	LastCompletedID uint64
	// Of the last completed checkpoint: duration, longest alignment, bytes
	// it wrote, and bytes of its whole chain (what a restore reads).
	LastDurationMs, LastAlignmentMs int64
	LastSize, LastChainSize         int64
	// LastFullSize is the size of the last completed full checkpoint.
	LastFullSize int64
	// Merged counts chains replaced by a base merged in the background
	// (Compacted), MergeFailures the merges that failed.
	Merged, MergeFailures uint64
	// StaleMessages counts messages for checkpoints no longer in progress.
	StaleMessages uint64
}

// Coordinator is the checkpoint coordinator: a deterministic state machine
// with no clock, disk, goroutine or channel inside, in the shape of raft's
// RawNode. Input comes through Tick (time) and Step (messages from tasks);
// work goes out through Ready, and Advance confirms it is done. It is not
// safe for concurrent use: one goroutine drives it.
//
// Guarantees: checkpoint ids increase by one per trigger and never repeat
// (continuing after Restore); at most one checkpoint is in progress; a
// checkpoint completes only after every task in Config.Tasks acknowledged it
// and the agent wrote its manifest; Completed and Aborted report each
// triggered checkpoint exactly once.
type Coordinator struct {
	cfg     Config
	tasks   map[string]int
	nowMs   int64
	started bool
	nextID  uint64

	// The chain of the last completed checkpoint, by task; nil forces the
	// next checkpoint to be full. baseBytes and incrBytes are its full and
	// incremental files' sizes, over all tasks.
	parent    uint64
	chains    map[string][]FileRef
	baseBytes int64
	incrBytes int64
	sinceFull int // completed incremental checkpoints since the last full one
	// compacting is the Through of the Compaction handed out and not yet
	// answered, 0 if none; mergeFailed makes the next checkpoint full.
	// merged are the merged bases, by task, with the chain prefix each
	// replaces; they are applied to every chain that still starts with it.
	compacting  uint64
	compactIn   map[string][]FileRef
	mergeFailed bool
	merged      map[string]mergedBase
	lastTrigMs  int64
	lastEndMs   int64
	ended       bool

	pending    *pending
	suspended  int  // Suspend calls not yet matched by Resume
	stalled    bool // see Stall
	diskFull   bool // see DiskFull
	hurry      bool // see Hurry
	savepoints []uint64
	failures   int
	failed     error

	ready Ready
	out   *Ready // handed out by Ready, awaiting Advance
	stats Stats
}

// mergedBase is a base merged from the chain prefix it replaces.
type mergedBase struct {
	prefix []FileRef
	base   FileRef
}

type pending struct {
	trigger Trigger
	startMs int64
	// deadlineMs is when it times out: Timeout after the trigger, or
	// after the end of a stall (Stall).
	deadlineMs int64
	acks       []*Ack // by task index
	nAcked     int
	writing    bool // the manifest was handed out
	m          *Manifest
}

// NewCoordinator returns a Coordinator whose first checkpoint will have id 1
// (see Restore) and will be triggered Interval after the first Tick.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Tasks = slices.Clone(cfg.Tasks)
	c := &Coordinator{cfg: cfg, tasks: make(map[string]int, len(cfg.Tasks)), nextID: 1}
	for i, t := range cfg.Tasks {
		c.tasks[t] = i
	}
	return c, nil
}

// Restore continues checkpoint ids after lastID, which should be the largest
// id of any manifest found (not only the restored one), so no id is ever
// reused. The next checkpoint is full. It must be called before the first
// trigger, or it returns ErrInProgress.
func (c *Coordinator) Restore(lastID uint64) error {
	if c.nextID != 1 || c.pending != nil {
		return fmt.Errorf("%w: restore after checkpoint %d was triggered", ErrInProgress, c.nextID-1)
	}
	c.nextID = lastID + 1
	c.chains, c.merged, c.compacting, c.compactIn = nil, nil, 0, nil
	return nil
}

// Tick tells the coordinator the time: nowMs is milliseconds on a clock that
// never goes back (the agent's monotonic clock; a wall-clock jump must not
// fire or stall checkpoints). A smaller value than before is ignored. Tick
// aborts a timed-out checkpoint and triggers due ones.
func (c *Coordinator) Tick(nowMs int64) {
	if !c.started {
		c.started, c.nowMs, c.lastTrigMs = true, nowMs, nowMs
	}
	c.nowMs = max(c.nowMs, nowMs)
	if p := c.pending; p != nil && !p.writing && !c.stalled && c.nowMs >= p.deadlineMs {
		c.abort(fmt.Errorf("%w after %v", ErrTimeout, c.cfg.Timeout))
	}
	c.maybeTrigger()
}

// Suspend stops checkpoints while a failover region restarts: its tasks
// cannot acknowledge until it runs again. The checkpoint in progress, if
// any, is aborted with reason (reported in the next Ready) without counting
// towards TolerableFailures, since no task failed to take it; nothing is
// triggered (requested savepoints wait) until every Suspend is matched by a
// Resume.
func (c *Coordinator) Suspend(reason error) {
	c.suspended++
	if c.pending != nil {
		c.abortCounting(reason, false)
	}
}

// Stall tells the coordinator whether the pipelines stand still for a
// reason outside the protocol: an exactly-once sink waiting in Write for
// its uplink with its buffer full (when_full = "block"). A barrier then
// waits behind the blocked write and passes once it returns, so while
// stalled the pending checkpoint does not time out (timing it out would
// count a failure for an outage, and after TolerableFailures fail the run,
// which cannot bring the uplink back), and no periodic checkpoint is
// triggered (nothing moves; a requested savepoint still is). When the stall
// ends, the pending checkpoint gets a full Timeout from then.
func (c *Coordinator) Stall(stalled bool) {
	if c.stalled == stalled {
		return
	}
	c.stalled = stalled
	if !stalled {
		if p := c.pending; p != nil {
			p.deadlineMs = c.nowMs + c.cfg.Timeout.Milliseconds()
		}
		c.maybeTrigger()
	}
}

// DiskFull tells the coordinator whether the disk that holds the
// checkpoints is full: a snapshot, merge or manifest write failed for lack
// of space, and not enough has been freed since. A full disk is a state
// the agent waits out, not a failure a restart would fix, so while it
// lasts aborted checkpoints do not count towards TolerableFailures and no
// periodic checkpoint is triggered (it would fail the same way); a
// requested savepoint still is. Tell it before stepping the Failure that
// revealed it. When it ends, the next checkpoint is triggered as the
// interval allows.
func (c *Coordinator) DiskFull(full bool) {
	if c.diskFull == full {
		return
	}
	c.diskFull = full
	if !full {
		c.maybeTrigger()
	}
}

// IsDiskFull reports the last DiskFull.
func (c *Coordinator) IsDiskFull() bool { return c.diskFull }

// Stalled reports the last Stall.
func (c *Coordinator) Stalled() bool { return c.stalled }

// Hurry asks for the next periodic checkpoint now: it is triggered as soon
// as none is in progress and MinPause after the last one ended has passed,
// without waiting for the rest of Interval. One call asks for one
// checkpoint; the request stays until that checkpoint is triggered. It
// gives way to what stops periodic checkpoints (Suspend, Stall, DiskFull).
// The agent asks while an ingest log is full and its pipelines have read
// it to its end: only a checkpoint lets the log shrink, so waiting out the
// interval would leave the device idle with readings held at the broker.
func (c *Coordinator) Hurry() {
	c.hurry = true
	c.maybeTrigger()
}

// Resume undoes one Suspend. The next checkpoint is triggered as the
// interval and pause allow, or at once if a savepoint is waiting.
func (c *Coordinator) Resume() {
	if c.suspended > 0 {
		c.suspended--
	}
	c.maybeTrigger()
}

func (c *Coordinator) maybeTrigger() {
	if !c.started || c.failed != nil || c.pending != nil || c.suspended > 0 {
		return
	}
	if (c.stalled || c.diskFull) && len(c.savepoints) == 0 {
		return
	}
	if len(c.savepoints) > 0 {
		// A savepoint is requested by a person: it waits for the checkpoint
		// in progress but not for the interval or the pause.
		req := c.savepoints[0]
		c.savepoints = c.savepoints[1:]
		c.trigger(Trigger{Kind: KindSavepoint, SavepointRequest: req})
		return
	}
	if c.nowMs-c.lastTrigMs < c.cfg.Interval.Milliseconds() && !c.hurry {
		return
	}
	if c.ended && c.nowMs-c.lastEndMs < c.cfg.MinPause.Milliseconds() {
		return
	}
	t := Trigger{Kind: KindFull}
	if c.chainExtends() {
		t.Kind, t.Parent = KindIncremental, c.parent
	}
	c.trigger(t)
}

// chainExtends reports whether the next periodic checkpoint may extend the
// last completed checkpoint's chain rather than start a new one. A chain
// that outgrew MaxChainRatio is extended while a merge replaces its prefix
// (MergeChains), and the merge is requested here.
func (c *Coordinator) chainExtends() bool {
	switch {
	case c.chains == nil, c.cfg.MaxChainRatio == 0, c.mergeFailed:
		return false
	case c.cfg.FullEvery > 0 && c.sinceFull >= c.cfg.FullEvery-1:
		return false
	case float64(c.incrBytes) <= c.cfg.MaxChainRatio*float64(c.baseBytes):
		return true
	case !c.cfg.MergeChains:
		return false
	case c.baseBytes < c.cfg.MinMergeBase && c.incrBytes >= c.baseBytes:
		return false
	}
	if c.compacting == 0 {
		cp := &Compaction{Through: c.parent, Chains: map[string][]FileRef{}}
		for task, chain := range c.chains {
			if len(chain) > 1 && chain[0].Kind == KindFull {
				cp.Chains[task] = slices.Clone(chain)
			}
		}
		c.compacting, c.compactIn = cp.Through, cp.Chains
		c.ready.Compaction = cp
	}
	return true
}

// compacted takes the answer to a Compaction.
func (c *Coordinator) compacted(m Compacted) {
	if m.Through == 0 || m.Through != c.compacting {
		c.stats.StaleMessages++
		return
	}
	in := c.compactIn
	c.compacting, c.compactIn = 0, nil
	if m.Err != nil {
		c.mergeFailed = true
		c.stats.MergeFailures++
		return
	}
	if c.merged == nil {
		c.merged = map[string]mergedBase{}
	}
	for task, f := range m.Files {
		if prefix, ok := in[task]; ok && f.Task == task && f.Kind == KindFull && f.Checkpoint == m.Through {
			c.merged[task] = mergedBase{prefix: prefix, base: f}
		}
	}
	c.stats.Merged++
	c.applyMerged()
}

// applyMerged puts each merged base in place of the prefix it replaces in
// the current chains, forgets bases no chain needs any more, and recounts
// the chain's bytes.
func (c *Coordinator) applyMerged() {
	for task, mb := range c.merged {
		chain := c.chains[task]
		switch {
		case len(chain) >= len(mb.prefix) && slices.Equal(chain[:len(mb.prefix)], mb.prefix):
			c.chains[task] = append([]FileRef{mb.base}, chain[len(mb.prefix):]...)
		case len(chain) > 0 && chain[0] == mb.base:
			// In place already: the manifests since the merge list it.
		default:
			delete(c.merged, task) // the task started a new chain
		}
	}
	c.baseBytes, c.incrBytes = 0, 0
	for _, chain := range c.chains {
		for _, f := range chain {
			if f.Kind == KindFull {
				c.baseBytes += f.Size
			} else {
				c.incrBytes += f.Size
			}
		}
	}
}

func (c *Coordinator) trigger(t Trigger) {
	t.ID, t.Mode = c.nextID, c.cfg.Mode
	c.nextID++
	c.pending = &pending{trigger: t, startMs: c.nowMs, deadlineMs: c.nowMs + c.cfg.Timeout.Milliseconds(), acks: make([]*Ack, len(c.cfg.Tasks))}
	c.lastTrigMs = c.nowMs
	if t.Kind != KindSavepoint {
		c.hurry = false
	}
	c.ready.Triggers = append(c.ready.Triggers, t)
	c.stats.Triggered++
}

// Step feeds a message from a task or the agent. Messages for a checkpoint
// that is no longer in progress are counted and ignored, as are repeated
// acknowledgements. It returns ErrUnknownTask for a task not in Config.Tasks,
// an error for a checkpoint id never triggered, and ErrBadAck (after aborting
// the checkpoint) for an acknowledgement that breaks the protocol.
func (c *Coordinator) Step(msg Message) error {
	switch m := msg.(type) {
	case TriggerSavepoint:
		if c.failed != nil {
			c.ready.Aborted = append(c.ready.Aborted, Aborted{Kind: KindSavepoint, SavepointRequest: m.Request, Reason: fmt.Errorf("%w: %w", ErrCoordinatorFailed, c.failed)})
			return nil
		}
		c.savepoints = append(c.savepoints, m.Request)
		c.maybeTrigger()
		return nil
	case Ack:
		p, err := c.current(m.CheckpointID, m.Task)
		if p == nil || err != nil {
			return err
		}
		i := c.tasks[m.Task]
		if p.writing || p.acks[i] != nil {
			return nil
		}
		if err := c.checkAck(p, &m); err != nil {
			c.abort(err)
			return err
		}
		p.acks[i] = &m
		p.nAcked++
		if p.nAcked == len(p.acks) {
			return c.prepareManifest(p)
		}
		return nil
	case Decline:
		if p, err := c.current(m.CheckpointID, m.Task); p == nil || err != nil {
			return err
		}
		c.abort(fmt.Errorf("%w by task %s: %s", ErrDeclined, m.Task, m.Reason))
		return nil
	case Compacted:
		c.compacted(m)
		return nil
	case Failure:
		if m.Task == "" {
			if p := c.pending; p == nil || p.trigger.ID != m.CheckpointID {
				c.stats.StaleMessages++
				return nil
			}
			c.abort(fmt.Errorf("%w: %w", ErrFailed, m.Err))
			return nil
		}
		if p, err := c.current(m.CheckpointID, m.Task); p == nil || err != nil {
			return err
		}
		c.abort(fmt.Errorf("%w at task %s: %w", ErrFailed, m.Task, m.Err))
		return nil
	}
	return fmt.Errorf("checkpoint: unknown message %T", msg)
}

// current returns the pending checkpoint a task's message is about, or nil
// for a stale message.
func (c *Coordinator) current(id uint64, task string) (*pending, error) {
	if _, ok := c.tasks[task]; !ok {
		return nil, fmt.Errorf("%w %q (checkpoint %d)", ErrUnknownTask, task, id)
	}
	if id == 0 || id >= c.nextID {
		return nil, fmt.Errorf("checkpoint: task %s: message for checkpoint %d, which was never triggered", task, id)
	}
	if c.pending == nil || c.pending.trigger.ID != id {
		c.stats.StaleMessages++
		return nil, nil
	}
	return c.pending, nil
}

func (c *Coordinator) checkAck(p *pending, a *Ack) error {
	for i, f := range a.Files {
		switch {
		case f.Checkpoint != a.CheckpointID || f.Task != a.Task:
			return fmt.Errorf("%w: task %s, checkpoint %d: file %s is of task %q, checkpoint %d", ErrBadAck, a.Task, a.CheckpointID, f.Name, f.Task, f.Checkpoint)
		case f.Kind == KindFull && i > 0:
			return fmt.Errorf("%w: task %s, checkpoint %d: full file %s after another file", ErrBadAck, a.Task, a.CheckpointID, f.Name)
		case f.Kind == KindIncremental && p.trigger.Kind != KindIncremental:
			return fmt.Errorf("%w: task %s: incremental file %s in %v checkpoint %d", ErrBadAck, a.Task, f.Name, p.trigger.Kind, a.CheckpointID)
		case f.Kind != KindFull && f.Kind != KindIncremental:
			return fmt.Errorf("%w: task %s, checkpoint %d: file %s has kind %v", ErrBadAck, a.Task, a.CheckpointID, f.Name, f.Kind)
		}
	}
	return nil
}

// prepareManifest builds the manifest of the fully acknowledged checkpoint
// and hands it out.
func (c *Coordinator) prepareManifest(p *pending) error {
	m := &Manifest{
		FormatVersion:     ManifestVersion,
		ID:                p.trigger.ID,
		Kind:              p.trigger.Kind,
		ConfigFingerprint: c.cfg.ConfigFingerprint,
		DurationMs:        c.nowMs - p.startMs,
	}
	for i, a := range p.acks {
		if p.trigger.Kind == KindIncremental && (len(a.Files) == 0 || a.Files[0].Kind != KindFull) {
			m.Files = append(m.Files, c.chains[c.cfg.Tasks[i]]...)
		}
		m.Files = append(m.Files, a.Files...)
		m.AlignmentMs = max(m.AlignmentMs, a.AlignmentMs)
		for k, v := range a.Positions {
			if _, dup := m.SourcePositions[k]; dup {
				err := fmt.Errorf("%w: source position %q reported twice (task %s)", ErrBadAck, k, a.Task)
				c.abort(err)
				return err
			}
			if m.SourcePositions == nil {
				m.SourcePositions = make(map[string]uint64)
			}
			m.SourcePositions[k] = v
		}
		for k, v := range a.Extra {
			if _, dup := m.Extra[k]; dup {
				err := fmt.Errorf("%w: extra key %q reported twice (task %s)", ErrBadAck, k, a.Task)
				c.abort(err)
				return err
			}
			if m.Extra == nil {
				m.Extra = make(map[string][]byte)
			}
			m.Extra[k] = v
		}
	}
	p.writing, p.m = true, m
	c.ready.Manifest = m
	return nil
}

// abort ends the pending checkpoint with reason, a failure.
func (c *Coordinator) abort(reason error) { c.abortCounting(reason, true) }

// abortCounting ends the pending checkpoint with reason; count says whether
// it counts towards TolerableFailures.
func (c *Coordinator) abortCounting(reason error, count bool) {
	p := c.pending
	c.pending = nil
	c.ended, c.lastEndMs = true, c.nowMs
	c.stats.Aborted++
	c.ready.Aborted = append(c.ready.Aborted, Aborted{ID: p.trigger.ID, Kind: p.trigger.Kind, SavepointRequest: p.trigger.SavepointRequest, Reason: reason})
	if c.ready.Manifest == p.m {
		c.ready.Manifest = nil
	}
	if p.trigger.Kind != KindSavepoint && count && !c.diskFull {
		c.failures++
	}
	if c.failures > c.cfg.TolerableFailures && c.failed == nil {
		c.failed = fmt.Errorf("%w: %d in a row (tolerable_failures = %d); last: %w", ErrTooManyFailures, c.failures, c.cfg.TolerableFailures, reason)
		for _, req := range c.savepoints {
			c.ready.Aborted = append(c.ready.Aborted, Aborted{Kind: KindSavepoint, SavepointRequest: req, Reason: fmt.Errorf("%w: %w", ErrCoordinatorFailed, c.failed)})
		}
		c.savepoints = nil
	}
	c.triggerWaitingSavepoint()
}

// triggerWaitingSavepoint triggers a requested savepoint that waited for
// the checkpoint that just ended. It must not wait for the next Tick: on a
// quiet device the agent stops ticking once nothing changes, so the
// savepoint would wait for the next reading.
func (c *Coordinator) triggerWaitingSavepoint() {
	if len(c.savepoints) > 0 {
		c.maybeTrigger()
	}
}

// complete makes the pending checkpoint, whose manifest is durable, complete.
func (c *Coordinator) complete(p *pending) {
	c.pending = nil
	c.ended, c.lastEndMs = true, c.nowMs
	m := p.m
	if m.Kind != KindSavepoint {
		// Savepoints leave the chain alone: checkpoints never build on a
		// savepoint's files, so deleting a savepoint by hand breaks nothing.
		c.failures = 0
		c.parent = m.ID
		c.chains = make(map[string][]FileRef, len(c.cfg.Tasks))
		for _, f := range m.Files {
			c.chains[f.Task] = append(c.chains[f.Task], f)
		}
		c.applyMerged()
		if m.Kind == KindFull {
			c.sinceFull, c.mergeFailed = 0, false
			c.stats.LastFullSize = m.FullSize()
		} else {
			c.sinceFull++
		}
	}
	c.stats.Completed++
	c.stats.LastCompletedID = m.ID
	c.stats.LastDurationMs, c.stats.LastAlignmentMs = m.DurationMs, m.AlignmentMs
	c.stats.LastSize, c.stats.LastChainSize = m.Size(), m.FullSize()
	c.ready.Completed = append(c.ready.Completed, Completed{ID: m.ID, Kind: m.Kind, SavepointRequest: p.trigger.SavepointRequest, Manifest: m})
	c.triggerWaitingSavepoint()
}

// HasReady reports whether Ready has work.
func (c *Coordinator) HasReady() bool { return !c.ready.empty() }

// Ready returns the work to do (see Ready) and forgets it; the agent must do
// it and call Advance before calling Ready again (calling it twice panics).
// Tick and Step may be called in between; their work waits for the next
// Ready.
func (c *Coordinator) Ready() Ready {
	if c.out != nil {
		panic("checkpoint: Ready called again before Advance")
	}
	rd := c.ready
	c.ready = Ready{}
	c.out = &rd
	return rd
}

// Advance tells the coordinator the last Ready was carried out. A manifest
// in it counts as durable unless a Failure for its checkpoint was stepped
// first; the checkpoint then completes and appears in the next Ready's
// Completed. Advance without Ready panics.
func (c *Coordinator) Advance() {
	rd := c.out
	if rd == nil {
		panic("checkpoint: Advance called without Ready")
	}
	c.out = nil
	if rd.Manifest != nil && c.pending != nil && c.pending.m == rd.Manifest {
		c.complete(c.pending)
	}
}

// Failed returns nil, or an error wrapping ErrTooManyFailures once more than
// Config.TolerableFailures checkpoints in a row have failed. After that no
// checkpoint is triggered; the agent should stop.
func (c *Coordinator) Failed() error { return c.failed }

// Stats returns the counters.
func (c *Coordinator) Stats() Stats {
	s := c.stats
	s.ConsecutiveFailures = c.failures
	if c.pending != nil {
		s.InProgress = c.pending.trigger.ID
	}
	return s
}
