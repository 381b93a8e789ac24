package walsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddy-edge/eddy/operators/io/walsink/qos2"
	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
)

// Message is one output to publish.
type Message struct {
	Topic   string
	Payload []byte
}

// Stats is a snapshot of the sink's counters.
type Stats struct {
	BacklogMessages int64         // committed, not yet PUBCOMP'd (in flight included)
	BacklogBytes    int64         // their topic + payload bytes
	OldestAge       time.Duration // since the oldest backlog message's epoch was committed; 0 without backlog
	WALBytes        int64         // size of all segment files
	Inflight        int           // open QoS 2 flows
	Window          int           // QoS 2 flows allowed open now: MaxInflight, or less as learnt from the broker
	Delivered       uint64        // PUBCOMPs received since Open
	Retried         uint64        // PUBLISH (DUP) and PUBREL re-sent on (re)connect since Open
	Dropped         uint64        // dropped by drop_oldest since Open
	Connected       bool
	WriteBlocked    bool // a Write waits for room (when_full = block)
	// ProtocolVersion is the MQTT version of the last connection: 5, or 4
	// (3.1.1, asked for or fallen back to); 0 before the first.
	ProtocolVersion int
	// MaxPacketSize is the broker's Maximum Packet Size from its MQTT 5
	// CONNACK; 0: none announced (or 3.1.1).
	MaxPacketSize int64
	// TooLarge counts messages dead-lettered too_large since Open: larger
	// than the broker's Maximum Packet Size, never published.
	TooLarge uint64
	// Expired counts messages dead-lettered expired since Open: they
	// waited longer than Options.MessageExpiry, never published.
	Expired uint64
	// Reasons counts the MQTT 5 reason codes the broker answered with
	// since Open (see Options.OnReason), by "packet/reason", e.g.
	// "pubrec/no_matching_subscribers".
	Reasons map[string]uint64
	// Refusal says why the broker refuses this sink's session while it
	// does (a CONNACK return code, or QoS 2: ErrQoS2Refused), with what to
	// do; empty otherwise. Nothing is delivered meanwhile; the backlog
	// stays in the WAL and the publisher keeps retrying.
	Refusal string
}

// Sink is the exactly-once MQTT sink. Write and PreCommit are called from
// one goroutine at a time, in order (the agent's sink runner); Commit may
// be called from another goroutine at any time, also while a Write is
// blocked on a full WAL (the agent's checkpointer: the commit it brings is
// what lets the backlog that blocks the Write drain). Recover is called
// before any of them. Stats and Close are safe at any time.
type Sink struct {
	opts Options
	log  *slog.Logger
	wal  *wal.Log

	// curMu guards cur and the session's intake; lock order: curMu, then mu.
	curMu sync.Mutex
	cur   *cursor

	mu           sync.Mutex
	st           logState
	buf          []byte // frames being written, under mu
	hdr          []byte // segment header being written, under mu
	needRecover  bool
	closed       bool
	failed       error // a WAL write failed in the publisher: the sink is inoperable
	warnedOver   bool
	warnedCount  bool // backlogMsgs went below zero (logged once)
	backlogMsgs  int64
	backlogBytes int64
	spaceCh      chan struct{} // closed and replaced by wakeWritersLocked
	blocked      bool          // a Write waits on spaceCh
	refusal      string        // Stats.Refusal
	refusalKind  refusalKind
	reasons      map[[2]string]uint64 // Stats.Reasons: packet, reason

	sess     *qos2.Session   // owned by the publisher goroutine after Open
	refusals refusalDetector // the publisher goroutine's
	win      *windowLearner  // the publisher goroutine's
	answers  int             // PUBRECs, PUBCOMPs, PUBACKs on the current connection (publisher's)
	// downgraded: the broker answered a QoS 2 PUBLISH with PUBACK; no new
	// flow starts (publisher's).
	downgraded bool
	flowsBuf   []qos2.Record // publisher's scratch
	q1         *qos1Window   // QoS 1 mode's window (nil at QoS 2), the publisher goroutine's
	q1next     uint64        // QoS 1: the seq after the last one the publisher consumed
	closeCh    chan struct{}
	work       chan struct{}
	done       chan struct{}
	delivered  atomic.Uint64
	dropped    atomic.Uint64
	retried    atomic.Uint64
	inflight   atomic.Int64
	window     atomic.Int64
	connected  atomic.Bool
	version    atomic.Int32 // of the last connection
	maxPacket  atomic.Int64 // the broker's Maximum Packet Size; 0: none
	tooLarge   atomic.Uint64
	expired    atomic.Uint64
	// fillAgain: fill stopped at a message to dead-letter until the
	// session's pending records are written (publisher's).
	fillAgain bool
	// aliasMax is the Topic Alias Maximum of the current connection's
	// broker (publisher's): its PUBLISHes use topic aliases up to it.
	aliasMax int
	// loggedRecvMax is the Receive Maximum last logged as lowering the
	// window (publisher's): the line is said once, not per connection.
	loggedRecvMax int
}

// Open opens (or creates) the WAL in dir, rebuilds the publish session it
// recorded, and starts publishing what is committed; the session's open
// flows resume first. If the WAL holds data of epochs that were never
// committed, call Recover before Write, PreCommit or Commit. Open reads the
// whole backlog once, to find the messages of open flows and count it.
func Open(dir string, opts Options, log *slog.Logger) (*Sink, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{
		opts: opts, log: log.With("sink", "walsink", "dir", dir),
		st:      newLogState(),
		spaceCh: make(chan struct{}), closeCh: make(chan struct{}),
		work: make(chan struct{}, 1), done: make(chan struct{}),
	}
	l, err := wal.Open(opts.FS, dir, s.st.apply)
	if err != nil {
		if errors.Is(err, wal.ErrCorrupt) {
			return nil, fmt.Errorf("walsink: open %s: %w: %w", dir, ErrCorrupt, err)
		}
		return nil, fmt.Errorf("walsink: open %s: %w", dir, err)
	}
	s.wal = l
	// A new WAL gets its first segment.
	if _, ok := l.Active(); !ok {
		if _, err := l.Rotate(s.st.appendState(nil)); err != nil {
			l.Close()
			return nil, fmt.Errorf("walsink: open %s: %w", dir, err)
		}
	}
	s.needRecover = len(s.st.uncommitted) > 0 || len(s.st.precommits) > 0
	if opts.QoS == 1 {
		if err := s.openQoS1(); err != nil {
			l.Close()
			return nil, fmt.Errorf("walsink: open %s: %w", dir, err)
		}
	}
	s.sess = qos2.New(qos2.Config{MaxInflight: opts.MaxInflight, KeepAlive: opts.KeepAlive})
	s.win = newWindowLearner(opts.MaxInflight)
	s.window.Store(int64(opts.MaxInflight))
	flows := make([]qos2.Record, 0, len(s.st.flows))
	for _, r := range s.st.flows {
		flows = append(flows, r)
	}
	if err := s.sess.Restore(flows); err != nil {
		l.Close()
		return nil, fmt.Errorf("walsink: open %s: %w: %w", dir, ErrCorrupt, err)
	}
	if err := s.loadBacklog(); err != nil {
		l.Close()
		return nil, fmt.Errorf("walsink: open %s: %w", dir, err)
	}
	if missing := s.sess.NeedsMessage(); len(missing) > 0 {
		l.Close()
		return nil, fmt.Errorf("walsink: open %s: %w: open flow of seq %d has no message data", dir, ErrCorrupt, missing[0])
	}
	s.cur = newCursor(l, s.segmentOf(s.st.nextAssign))
	s.inflight.Store(int64(s.sess.Inflight()))
	if s.sess.Inflight() > 0 || s.backlogMsgs > 0 {
		s.log.Info("walsink: resuming", "open_flows", s.sess.Inflight(), "backlog", s.backlogMsgs,
			"committed_epoch", s.st.committedEpoch)
	}
	go s.runPublisher()
	return s, nil
}

// segmentOf is the first segment that may hold data seq ≥ seq.
func (s *Sink) segmentOf(seq uint64) uint64 {
	for _, sd := range s.st.segs {
		if sd.hasData && sd.last >= seq {
			return sd.id
		}
	}
	active, _ := s.wal.Active()
	return active.ID
}

// loadBacklog reads the data from the oldest open flow on: it gives
// restored flows their messages and counts the committed backlog.
func (s *Sink) loadBacklog() error {
	from := s.st.nextAssign
	for seq := range s.st.flows {
		from = min(from, seq)
	}
	if from > s.st.committedSeq {
		return nil
	}
	c := newCursor(s.wal, s.segmentOf(from))
	defer c.close()
	for {
		d, ok, err := c.peek()
		if err != nil {
			return err
		}
		if !ok || d.seq > s.st.committedSeq {
			return nil
		}
		c.advance()
		size := int64(len(d.topic) + len(d.payload))
		if _, open := s.st.flows[d.seq]; open {
			s.sess.SetMessage(d.seq, d.topic, d.payload, d.retain)
		} else if d.seq < s.st.nextAssign || s.st.isAborted(d.seq) {
			continue
		}
		s.backlogMsgs++
		s.backlogBytes += size
	}
}

// Write appends msgs, the results produced in epoch (between checkpoints
// epoch-1 and epoch), to the WAL in one write, without syncing. Nothing is
// published before Commit(n ≥ epoch). Epochs must not decrease, and an
// epoch cannot be written after PreCommit of it or a later one; a later
// epoch may be written before PreCommit of an earlier one. When the
// WAL is full (Options.MaxDiskBytes) Write blocks (Block) or drops the
// oldest unsent messages (DropOldest). msgs and their memory may be reused
// once Write returns. It is WriteContext with context.Background.
func (s *Sink) Write(epoch uint64, msgs []Message) error {
	return s.WriteContext(context.Background(), epoch, msgs)
}

// WriteContext is Write, giving up with ctx's error (wrapped) while blocked
// on a full WAL; nothing of msgs is written then.
func (s *Sink) WriteContext(ctx context.Context, epoch uint64, msgs []Message) error {
	need := 0
	for i, m := range msgs {
		if err := checkMessage(m); err != nil {
			return fmt.Errorf("walsink: write message %d: %w", i, err)
		}
		need += dataOverhead + len(m.Topic) + len(m.Payload)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if s.opts.Immediate {
		epoch = max(epoch, s.st.committedEpoch)
	} else if epoch < s.st.lastEpoch || epoch <= s.st.committedEpoch || epoch <= s.highestPreCommitLocked() {
		return fmt.Errorf("%w: write epoch %d after epoch %d (committed %d, pre-committed %d)",
			ErrEpoch, epoch, s.st.lastEpoch, s.st.committedEpoch, s.highestPreCommitLocked())
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := s.makeRoomLocked(ctx, int64(need)); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	seq := s.st.nextSeq
	for _, m := range msgs {
		s.buf = appendData(s.buf, epoch, seq, s.opts.Retain, m.Topic, m.Payload)
		seq++
	}
	now := time.Now().UnixNano()
	if s.opts.Immediate {
		// Publishable at once: the commit record goes in the same write.
		s.buf = appendWords(s.buf, kindCommit, epoch, seq-1, uint64(now))
	}
	seg, err := s.appendLocked(s.buf)
	if err != nil {
		return err
	}
	seq = s.st.nextSeq
	for _, m := range msgs {
		s.st.applyData(seg, epoch, seq, int64(len(m.Topic)+len(m.Payload)))
		seq++
	}
	if s.opts.Immediate {
		count, bytes := s.st.applyCommit(epoch, seq-1, now)
		s.backlogMsgs += count
		s.backlogBytes += bytes
		s.wake()
	}
	return nil
}

func checkMessage(m Message) error {
	switch {
	case m.Topic == "":
		return fmt.Errorf("%w: empty topic", ErrMessage)
	case len(m.Topic) > 65535:
		return fmt.Errorf("%w: topic of %d bytes", ErrMessage, len(m.Topic))
	case strings.ContainsAny(m.Topic, "+#\x00"):
		return fmt.Errorf("%w: topic %q has a wildcard or NUL", ErrMessage, m.Topic)
	case dataOverhead+len(m.Topic)+len(m.Payload) > wal.MaxFrameBytes:
		return fmt.Errorf("%w: %d-byte payload: %w", ErrMessage, len(m.Payload), wal.ErrFrameTooLarge)
	}
	return nil
}

func (s *Sink) usableLocked() error {
	switch {
	case s.closed:
		return ErrClosed
	case s.failed != nil:
		return s.failed
	case s.needRecover:
		return ErrRecoverRequired
	}
	return nil
}

func (s *Sink) highestPreCommitLocked() uint64 {
	h := s.st.committedEpoch
	for _, m := range s.st.precommits {
		h = max(h, m.epoch)
	}
	return h
}

// appendLocked writes complete frames to the active segment, rotating first
// when they would overflow it, and returns the segment they went to.
func (s *Sink) appendLocked(frames []byte) (uint64, error) {
	active, _ := s.wal.Active()
	if active.Size+int64(len(frames)) > s.opts.SegmentBytes && active.Size > int64(wal.HeaderBytes+len(s.hdr)) {
		id, err := s.rotateLocked()
		if err != nil {
			return 0, err
		}
		active.ID = id
	}
	if err := s.writeWAL(frames); err != nil {
		return 0, err
	}
	return active.ID, nil
}

// writeWAL writes complete frames to the active segment, without syncing.
func (s *Sink) writeWAL(frames []byte) error {
	if s.opts.onWrite != nil {
		s.opts.onWrite(frames)
	}
	if err := s.wal.Write(frames); err != nil {
		return fmt.Errorf("walsink: %w", err)
	}
	return nil
}

// syncWAL makes everything written to the WAL so far durable.
func (s *Sink) syncWAL() error {
	if s.opts.onSync != nil {
		s.opts.onSync()
	}
	return s.wal.Sync()
}

func (s *Sink) rotateLocked() (uint64, error) {
	s.hdr = s.st.appendState(s.hdr[:0])
	if s.opts.onWrite != nil {
		s.opts.onWrite(s.hdr)
	}
	id, err := s.wal.Rotate(s.hdr)
	if err != nil {
		return 0, fmt.Errorf("walsink: %w", err)
	}
	return id, nil
}

// makeRoomLocked applies WhenFull until need more bytes fit under
// MaxDiskBytes. It may release mu while it waits or drops.
func (s *Sink) makeRoomLocked(ctx context.Context, need int64) error {
	for {
		if s.closed {
			return ErrClosed
		}
		if s.wal.Size()+need <= s.opts.MaxDiskBytes {
			s.warnedOver = false
			return nil
		}
		if s.backlogMsgs <= 0 {
			// All of it is uncommitted: blocking would stall the checkpoint
			// that commits it, forever.
			if !s.warnedOver {
				s.warnedOver = true
				s.log.Warn("walsink: WAL over max_disk with uncommitted data only; accepting more",
					"wal_bytes", s.wal.Size(), "max_disk", s.opts.MaxDiskBytes)
			}
			return nil
		}
		if s.opts.WhenFull == DropOldest {
			s.mu.Unlock()
			s.curMu.Lock()
			s.mu.Lock()
			dropped, err := s.dropOldestLocked()
			s.curMu.Unlock()
			if err != nil {
				return err
			}
			if !dropped {
				// Only open flows left: they cannot be dropped (their ids are
				// live at the broker), and they are few.
				return nil
			}
			continue
		}
		ch := s.spaceCh
		s.blocked = true
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			s.blocked = false
			return fmt.Errorf("walsink: write blocked on a full WAL: %w", ctx.Err())
		case <-s.closeCh:
			s.mu.Lock()
			s.blocked = false
			return ErrClosed
		}
		s.blocked = false
	}
}

// dropOldestLocked drops the committed, never-sent messages from the oldest
// one to the end of its segment, durably, and deletes segments that freed.
// It reports false when there was nothing to drop. curMu and mu are held.
func (s *Sink) dropOldestLocked() (bool, error) {
	var count, bytes int64
	first, last, limit := uint64(0), uint64(0), s.st.committedSeq
	for {
		d, ok, err := s.cur.peek()
		if err != nil {
			return false, err
		}
		if !ok || d.seq > limit {
			break
		}
		if d.seq < s.st.nextAssign || s.st.isAborted(d.seq) {
			s.cur.advance()
			continue
		}
		if count == 0 {
			// Drop to the end of this message's segment, so the segment
			// can go (unless an open flow still holds it).
			seg := s.segmentOf(d.seq)
			for _, sd := range s.st.segs {
				if sd.id == seg && sd.hasData {
					limit = min(limit, sd.last)
				}
			}
			if active, _ := s.wal.Active(); active.ID == seg {
				if _, err := s.rotateLocked(); err != nil {
					return false, err
				}
			}
			first = d.seq
		}
		s.cur.advance()
		count++
		bytes += int64(len(d.topic) + len(d.payload))
		last = d.seq
	}
	if count == 0 {
		return false, nil
	}
	s.buf = appendWords(s.buf[:0], kindDrop, first, last, uint64(count), uint64(bytes))
	if _, err := s.appendLocked(s.buf); err != nil {
		return false, err
	}
	if err := s.syncWAL(); err != nil {
		return false, fmt.Errorf("walsink: sync drop record: %w", err)
	}
	s.st.nextAssign = last + 1
	s.backlogMsgs -= count
	s.backlogBytes -= bytes
	if s.backlogMsgs <= 0 {
		s.wakeWritersLocked() // and WaitDelivered
	}
	s.dropped.Add(uint64(count))
	s.log.Warn("walsink: WAL full, dropped oldest unsent messages", "messages", count, "bytes", bytes,
		"from_seq", first, "to_seq", last, "max_disk", s.opts.MaxDiskBytes)
	return true, s.collectLocked()
}

// collectLocked deletes every non-active segment whose data is all
// delivered, dropped or aborted. A state record, synced first, carries what
// the deleted segments' records said.
func (s *Sink) collectLocked() error {
	segs := s.wal.Segments()
	if len(segs) < 2 {
		return nil
	}
	var victims []uint64
	for _, seg := range segs[:len(segs)-1] {
		i := slices.IndexFunc(s.st.segs, func(sd segData) bool { return sd.id == seg.ID })
		if i >= 0 {
			sd := s.st.segs[i]
			if sd.last >= s.st.nextAssign {
				continue
			}
			busy := false
			for seq := range s.st.flows {
				if seq >= sd.first && seq <= sd.last {
					busy = true
					break
				}
			}
			if busy {
				continue
			}
		}
		victims = append(victims, seg.ID)
	}
	if len(victims) == 0 {
		return nil
	}
	s.pruneCommitTimesLocked()
	s.hdr = s.st.appendState(s.hdr[:0])
	if err := s.writeWAL(s.hdr); err != nil {
		return err
	}
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("walsink: %w", err)
	}
	for _, id := range victims {
		if err := s.wal.Remove(id); err != nil {
			return fmt.Errorf("walsink: %w", err)
		}
		s.st.segs = slices.DeleteFunc(s.st.segs, func(sd segData) bool { return sd.id == id })
	}
	s.wakeWritersLocked()
	return nil
}

// wakeWritersLocked wakes writers blocked in makeRoomLocked: called when
// segments are freed and when the committed backlog drains to nothing (it
// may do so without freeing a segment, since the last one also holds
// uncommitted data, and makeRoomLocked then accepts the write).
func (s *Sink) wakeWritersLocked() {
	close(s.spaceCh)
	s.spaceCh = make(chan struct{})
}

// oldestLocked is the lowest seq not yet delivered or dropped.
func (s *Sink) oldestLocked() uint64 {
	oldest := s.st.nextAssign
	for seq := range s.st.flows {
		oldest = min(oldest, seq)
	}
	return oldest
}

func (s *Sink) pruneCommitTimesLocked() {
	oldest := s.oldestLocked()
	i := 0
	for i < len(s.st.commitTimes) && s.st.commitTimes[i].seq < oldest {
		i++
	}
	s.st.commitTimes = slices.Delete(s.st.commitTimes, 0, i)
}

// PreCommit makes everything written for epochs ≤ epoch durable (one
// fsync) and marks it pre-committed: the sink's part of checkpoint epoch.
// Data of later epochs written before it is not part of it. After it
// returns, Write accepts only later epochs.
func (s *Sink) PreCommit(epoch uint64) error {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.opts.Immediate {
		s.mu.Unlock()
		if err := s.syncWAL(); err != nil {
			return fmt.Errorf("walsink: pre-commit %d: %w", epoch, err)
		}
		return nil
	}
	if epoch < s.highestPreCommitLocked() {
		s.mu.Unlock()
		return fmt.Errorf("%w: pre-commit %d after %d", ErrEpoch, epoch, s.highestPreCommitLocked())
	}
	// The mark ends before the data of later epochs already written: the
	// commit of epoch publishes epochs ≤ epoch only, and an epoch's data
	// (one span) is never split by a mark, which the backlog count, taken
	// per span at commit, relies on.
	seq := s.st.nextSeq - 1
	for _, sp := range s.st.uncommitted {
		if sp.epoch > epoch {
			seq = sp.first - 1
			break
		}
	}
	s.buf = appendWords(s.buf[:0], kindPreCommit, epoch, seq)
	if _, err := s.appendLocked(s.buf); err != nil {
		s.mu.Unlock()
		return err
	}
	s.st.precommits = append(s.st.precommits, mark{epoch: epoch, seq: seq})
	s.st.lastEpoch = max(s.st.lastEpoch, epoch)
	s.mu.Unlock()
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("walsink: pre-commit %d: %w", epoch, err)
	}
	return nil
}

// Commit tells the sink checkpoint epoch completed: the pre-committed data
// of epochs ≤ epoch becomes publishable, and the publisher sends it in
// order. Committing an epoch at or below the last committed one is a no-op.
// The commit record is not synced: after a crash Recover learns the
// completed checkpoint from the caller.
func (s *Sink) Commit(epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if epoch <= s.st.committedEpoch || s.opts.Immediate {
		return nil
	}
	seq := s.st.committedSeq
	for _, m := range s.st.precommits {
		if m.epoch <= epoch {
			seq = max(seq, m.seq)
		}
	}
	for _, sp := range s.st.uncommitted {
		if sp.epoch <= epoch && sp.last > seq {
			return fmt.Errorf("%w: commit %d: epoch %d has data up to seq %d, pre-committed to %d",
				ErrNotPreCommitted, epoch, sp.epoch, sp.last, seq)
		}
	}
	return s.commitLocked(epoch, seq)
}

func (s *Sink) commitLocked(epoch, seq uint64) error {
	now := time.Now().UnixNano()
	s.buf = appendWords(s.buf[:0], kindCommit, epoch, seq, uint64(now))
	if _, err := s.appendLocked(s.buf); err != nil {
		return err
	}
	count, bytes := s.st.applyCommit(epoch, seq, now)
	s.backlogMsgs += count
	s.backlogBytes += bytes
	s.wake()
	return nil
}

// Recover is called once after Open with the last completed checkpoint:
// data of epochs ≤ lastCompleted that was pre-committed becomes publishable
// (if it was not already), and everything after it is discarded for good —
// replay recomputes it and writes it again, starting with epoch
// lastCompleted+1. It syncs. A lastCompleted below what the WAL already
// committed cannot take back published messages: it is logged and raised.
func (s *Sink) Recover(lastCompleted uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.opts.Immediate {
		// At least once: whatever the WAL holds is published (a write torn
		// by power loss may have lost its commit record).
		if last := s.st.nextSeq - 1; last > s.st.committedSeq {
			if err := s.commitLocked(max(s.st.lastEpoch, lastCompleted), last); err != nil {
				return err
			}
		}
		s.needRecover = false
		return nil
	}
	if lastCompleted < s.st.committedEpoch {
		s.log.Warn("walsink: recover to a checkpoint older than the WAL's last commit; its outputs may be published again",
			"recover", lastCompleted, "wal_committed", s.st.committedEpoch)
		lastCompleted = s.st.committedEpoch
	}
	seq := s.st.committedSeq
	for _, m := range s.st.precommits {
		if m.epoch <= lastCompleted {
			seq = max(seq, m.seq)
		}
	}
	for _, sp := range s.st.uncommitted {
		if sp.epoch <= lastCompleted && sp.last > seq {
			s.log.Warn("walsink: data of a completed checkpoint was never pre-committed; discarding it",
				"epoch", sp.epoch, "messages", sp.count)
		}
	}
	discarded := int64(0)
	for _, sp := range s.st.uncommitted {
		if sp.first > seq {
			discarded += sp.count
		}
	}
	if err := s.commitLocked(lastCompleted, seq); err != nil {
		return err
	}
	from, to := seq+1, s.st.nextSeq-1
	s.buf = appendWords(s.buf[:0], kindAbort, lastCompleted, from, to)
	if _, err := s.appendLocked(s.buf); err != nil {
		return err
	}
	s.st.applyAbort(lastCompleted, from, to)
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("walsink: recover: %w", err)
	}
	s.needRecover = false
	if discarded > 0 {
		s.log.Info("walsink: discarded outputs of uncompleted checkpoints", "messages", discarded, "after_epoch", lastCompleted)
	}
	return nil
}

// Stats returns the current counters.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	st := Stats{
		BacklogMessages: s.backlogMsgs,
		BacklogBytes:    s.backlogBytes,
		WALBytes:        s.wal.Size(),
		WriteBlocked:    s.blocked,
		Refusal:         s.refusal,
	}
	if len(s.reasons) > 0 {
		st.Reasons = make(map[string]uint64, len(s.reasons))
		for k, v := range s.reasons {
			st.Reasons[k[0]+"/"+k[1]] = v
		}
	}
	if s.backlogMsgs > 0 {
		oldest := s.oldestLocked()
		for _, c := range s.st.commitTimes {
			if c.seq >= oldest {
				st.OldestAge = time.Since(time.Unix(0, c.unixNano))
				break
			}
		}
	}
	s.mu.Unlock()
	st.Inflight = int(s.inflight.Load())
	st.Window = int(s.window.Load())
	st.Delivered = s.delivered.Load()
	st.Retried = s.retried.Load()
	st.Dropped = s.dropped.Load()
	st.Connected = s.connected.Load()
	st.ProtocolVersion = int(s.version.Load())
	st.MaxPacketSize = s.maxPacket.Load()
	st.TooLarge = s.tooLarge.Load()
	st.Expired = s.expired.Load()
	return st
}

// WaitDelivered waits until every committed message is delivered (the
// backlog is empty: PUBCOMP received for each), or ctx ends, or the sink is
// closed. It returns the number of committed messages still undelivered:
// 0 with a nil error, or more with ctx's error or ErrClosed. Messages of
// epochs not yet committed are not waited for and not counted.
func (s *Sink) WaitDelivered(ctx context.Context) (int64, error) {
	for {
		s.mu.Lock()
		n, ch, closed := s.backlogMsgs, s.spaceCh, s.closed
		s.mu.Unlock()
		switch {
		case n <= 0:
			return 0, nil
		case closed:
			return n, ErrClosed
		}
		// spaceCh is closed when the backlog drains to nothing (and when
		// segments are freed, on the way).
		select {
		case <-ch:
		case <-ctx.Done():
			return n, ctx.Err()
		case <-s.closeCh:
		}
	}
}

// MaxPacketSize is the Maximum Packet Size the broker announced in the
// CONNACK of the sink's MQTT 5 connection, in bytes (see PublishSize); 0
// when none was announced, before the first connection, and at 3.1.1. A
// message whose PUBLISH is larger is dead-lettered too_large by the
// publisher; a caller can dead-letter such results before Write. Cheap:
// for every result.
func (s *Sink) MaxPacketSize() int64 { return s.maxPacket.Load() }

// WriteBlocked reports whether a Write waits for room (when_full = block):
// Stats().WriteBlocked without the rest of Stats' work, for polling.
func (s *Sink) WriteBlocked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked
}

// Close stops publishing (open flows stay in the WAL and resume at the next
// Open), unblocks blocked Writes with ErrClosed, and closes the WAL. It does
// not wait for the backlog to drain.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closeCh)
	s.mu.Unlock()
	<-s.done
	s.curMu.Lock()
	s.cur.close()
	s.curMu.Unlock()
	return s.wal.Close()
}

func (s *Sink) wake() {
	select {
	case s.work <- struct{}{}:
	default:
	}
}
