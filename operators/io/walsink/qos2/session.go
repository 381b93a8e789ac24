package qos2

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Step is the recorded state of one publish flow. The zero value is invalid.
type Step uint8

const (
	_ Step = iota // the zero value: invalid
	// StepPublishSent: the message got its packet id; a PUBLISH may be out.
	StepPublishSent
	// StepPubrecReceived: the broker has the message; PUBREL may be out.
	StepPubrecReceived
	// StepPubcompReceived: the flow is finished and its id free.
	StepPubcompReceived
)

func (st Step) String() string {
	switch st {
	case StepPublishSent:
		return "publish-sent"
	case StepPubrecReceived:
		return "pubrec-received"
	case StepPubcompReceived:
		return "pubcomp-received"
	}
	return fmt.Sprintf("step(%d)", uint8(st))
}

// Record is one flow's step, to be written to the log.
type Record struct {
	Seq  uint64 // the message's sequence number in the WAL
	ID   uint16 // MQTT packet id, 1..65535
	Step Step
}

// PacketKind says which MQTT packet to send. The zero value is invalid.
type PacketKind uint8

const (
	_ PacketKind = iota // the zero value: invalid
	// PacketPublish is a QoS 2 PUBLISH (DUP set on a re-send).
	PacketPublish
	// PacketPubrel is a PUBREL.
	PacketPubrel
	// PacketPingreq is a PINGREQ.
	PacketPingreq
)

// Packet is one packet to send. Topic and Payload belong to the session and
// are valid until Advance.
type Packet struct {
	Kind    PacketKind
	ID      uint16
	Dup     bool
	Retain  bool
	Seq     uint64
	Topic   []byte
	Payload []byte
}

// Completion reports a finished flow.
type Completion struct {
	Seq   uint64
	Bytes int // topic + payload bytes
}

// Ready is the session's pending work. Records must be durable (one write,
// fsync when MustSync) before Packets are sent, in order. Slices are valid
// until Advance.
type Ready struct {
	Records   []Record
	MustSync  bool
	Packets   []Packet
	Completed []Completion // flows finished by PUBCOMP since the last Ready
	// Disconnect asks the driver to drop the connection (keepalive expired);
	// the session is already in the disconnected state.
	Disconnect bool
}

// Config configures a Session.
type Config struct {
	// MaxInflight is the maximum number of open flows, 1..65535: the
	// largest window SetWindow may set, and the window until it does.
	MaxInflight int
	// KeepAlive is the MQTT keepalive; 0 disables PINGREQ and the
	// liveness rule (see Tick). It is also the ping timeout: how long the
	// broker may stay silent after a PINGREQ.
	KeepAlive time.Duration
}

// ErrProtocol is returned (wrapped) by Step for a packet the session cannot
// accept; the driver should drop the connection.
var ErrProtocol = errors.New("qos2: protocol error")

type flow struct {
	seq    uint64
	id     uint16
	step   Step
	retain bool
	loaded bool // topic and payload present (false for restored flows until SetMessage)
	parked bool // beyond the window at Connected: resumed when an earlier flow ends
	out    bool // its PUBLISH or PUBREL was sent (Advance) and not answered yet
	// released: a PUBREL of this flow may have left (a Ready holding one
	// was advanced), or the flow was restored at StepPubrecReceived (an
	// earlier process may have sent one). Until then the broker cannot
	// have released the message, whatever it answered.
	released bool
	topic    []byte
	payload  []byte
}

// Session is one client's QoS 2 publish state. It is not safe for
// concurrent use.
type Session struct {
	cfg    Config
	window int     // open flows allowed now, 1..cfg.MaxInflight (SetWindow)
	flows  []*flow // open flows, in seq order
	byID   map[uint16]*flow
	free   []*flow
	// doneUnsynced holds the ids of flows finished by a PUBCOMP whose
	// record is not known durable yet (no Ready with MustSync advanced
	// since): a flow taking such an id syncs before its PUBLISH.
	doneUnsynced map[uint16]struct{}
	connected    bool
	retried      uint64
	unreleased   uint64
	awaiting     int // flows with out set
	releasing    int // of those, flows at StepPubrecReceived (PUBREL out)

	lastSent    time.Time
	lastRecv    time.Time // of the latest bytes from the broker (Received)
	pingSentAt  time.Time
	pingPending bool

	rd      Ready
	inReady bool
}

// New returns a disconnected session without flows.
func New(cfg Config) *Session {
	if cfg.MaxInflight < 1 || cfg.MaxInflight > 65535 {
		panic(fmt.Sprintf("qos2: MaxInflight %d out of 1..65535", cfg.MaxInflight))
	}
	return &Session{cfg: cfg, window: cfg.MaxInflight, byID: make(map[uint16]*flow, cfg.MaxInflight), doneUnsynced: make(map[uint16]struct{}, cfg.MaxInflight)}
}

// Restore loads flows recorded in the log (their last step each, any order).
// Flows at StepPubcompReceived are ignored. Call before Connected. Flows at
// StepPublishSent need their message via SetMessage before Connected.
// Restore may load more than MaxInflight flows (a smaller limit than in the
// last run); no new flow starts until they are fewer.
func (s *Session) Restore(recs []Record) error {
	for _, r := range recs {
		if r.Step == StepPubcompReceived {
			continue
		}
		if r.Step != StepPublishSent && r.Step != StepPubrecReceived {
			return fmt.Errorf("qos2: restore seq %d: invalid step %d", r.Seq, r.Step)
		}
		if r.ID == 0 {
			return fmt.Errorf("qos2: restore seq %d: packet id 0", r.Seq)
		}
		if _, dup := s.byID[r.ID]; dup {
			return fmt.Errorf("qos2: restore seq %d: packet id %d already open", r.Seq, r.ID)
		}
		f := s.newFlow()
		f.seq, f.id, f.step = r.Seq, r.ID, r.Step
		f.released = r.Step == StepPubrecReceived
		s.flows = append(s.flows, f)
		s.byID[r.ID] = f
	}
	slices.SortFunc(s.flows, func(a, b *flow) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return nil
}

// NeedsMessage lists the seqs of restored flows that wait for SetMessage.
func (s *Session) NeedsMessage() []uint64 {
	var seqs []uint64
	for _, f := range s.flows {
		if f.step == StepPublishSent && !f.loaded {
			seqs = append(seqs, f.seq)
		}
	}
	return seqs
}

// SetMessage gives a restored flow its message (copied).
func (s *Session) SetMessage(seq uint64, topic, payload []byte, retain bool) {
	for _, f := range s.flows {
		if f.seq == seq {
			f.topic = append(f.topic[:0], topic...)
			f.payload = append(f.payload[:0], payload...)
			f.retain, f.loaded = retain, true
			return
		}
	}
}

// Inflight is the number of open flows.
func (s *Session) Inflight() int { return len(s.flows) }

// LastSeq is the highest seq of an open flow, 0 if none.
func (s *Session) LastSeq() uint64 {
	if len(s.flows) == 0 {
		return 0
	}
	return s.flows[len(s.flows)-1].seq
}

// OpenFlows appends the open flows' current records to dst, in seq order.
func (s *Session) OpenFlows(dst []Record) []Record {
	for _, f := range s.flows {
		dst = append(dst, Record{Seq: f.seq, ID: f.id, Step: f.step})
	}
	return dst
}

// Retried counts PUBLISH (DUP) and PUBREL packets re-sent on (re)connect.
func (s *Session) Retried() uint64 { return s.retried }

// Connected tells the session the driver has a connection with a CONNACK
// (clean session 0), at time now; it queues the resumption of open flows,
// the first Window of them in seq order. Flows beyond the window (restored
// under a smaller limit than the last run's, or open when the window
// shrank) are parked and resumed one per finished flow, so the broker never
// has more than Window of this client's flows to take at once.
func (s *Session) Connected(now time.Time) {
	s.connected = true
	s.pingPending = false
	s.lastSent, s.lastRecv = now, now // the CONNACK just came
	for i, f := range s.flows {
		f.parked = i >= s.window
		if !f.parked {
			s.resume(f)
		}
	}
}

// Window is the number of open flows allowed now.
func (s *Session) Window() int { return s.window }

// SetWindow sets the number of open flows allowed, clamped to
// 1..MaxInflight. Flows already open stay open; no new flow starts while
// Inflight is at or above it, and at the next Connected flows beyond it
// are parked.
func (s *Session) SetWindow(n int) {
	s.window = min(max(n, 1), s.cfg.MaxInflight)
}

func (s *Session) resume(f *flow) {
	switch f.step {
	case StepPublishSent:
		if !f.loaded {
			panic(fmt.Sprintf("qos2: flow seq %d resumed without its message", f.seq))
		}
		s.queue(Packet{Kind: PacketPublish, ID: f.id, Dup: true, Retain: f.retain, Seq: f.seq, Topic: f.topic, Payload: f.payload})
	case StepPubrecReceived:
		s.queue(Packet{Kind: PacketPubrel, ID: f.id, Seq: f.seq})
	}
	s.retried++
}

// Disconnected tells the session the connection is gone; queued packets are
// dropped (open flows resume on the next Connected), records are kept.
//
// A flow whose PUBREC arrived but whose PUBREL never left (not released)
// goes back to StepPublishSent, with a record (no sync needed: lost, the
// flow resumes at PUBREL, as before): the next connection publishes it
// again, DUP=1, same id. A PUBREC is not proof that the broker kept the
// message (mosquitto answers one for a QoS 2 PUBLISH over its in-flight
// limit and drops the message); a broker that kept the id answers the
// re-send with PUBREC and delivers nothing twice (MQTT 3.1.1 §4.3.3), one
// that dropped it takes it now. Once a PUBREL may have left, the flow only
// ever gets PUBREL again (see the package doc).
func (s *Session) Disconnected() {
	s.connected = false
	s.pingPending = false
	s.rd.Packets = s.rd.Packets[:0]
	for _, f := range s.flows {
		f.out = false
		if f.step == StepPubrecReceived && !f.released && f.loaded {
			f.step = StepPublishSent
			s.record(Record{Seq: f.seq, ID: f.id, Step: StepPublishSent}, false)
			s.unreleased++
		}
	}
	s.awaiting, s.releasing = 0, 0
}

// Unreleased counts flows Disconnected put back to StepPublishSent because
// their PUBREL had not left: PUBRECs that a closed connection left
// unconfirmed.
func (s *Session) Unreleased() uint64 { return s.unreleased }

// Awaiting is the number of open flows whose last PUBLISH or PUBREL was
// sent (a Ready holding it was Advanced) and is not answered yet. While it
// is above zero, the broker's answers are on their way, and a driver can
// wait for them so that one fsync covers their records and the pending
// ones (see HasRecords), instead of one fsync for each few steps.
func (s *Session) Awaiting() int { return s.awaiting }

// Releasing is the number of open flows whose PUBREL was sent and is not
// answered yet (a subset of Awaiting).
func (s *Session) Releasing() int { return s.releasing }

// answered clears f.out: an answer for f arrived.
func (s *Session) answered(f *flow) {
	if f.out {
		f.out = false
		s.awaiting--
		if f.step == StepPubrecReceived {
			s.releasing--
		}
	}
}

// HasRecords reports whether the pending Ready holds records to persist.
func (s *Session) HasRecords() bool { return len(s.rd.Records) > 0 }

// MustSync reports whether the pending Ready's records need an fsync.
func (s *Session) MustSync() bool { return s.rd.MustSync }

// IsConnected reports whether the session is connected.
func (s *Session) IsConnected() bool { return s.connected }

// CanPublish reports whether Publish may start another flow now: connected
// and below Window.
func (s *Session) CanPublish() bool {
	return s.connected && len(s.flows) < s.window
}

// CanPublishSeq reports whether Publish may start the flow of seq now:
// CanPublish, and its packet id (IDOf) not held by an open flow (one 65535
// seqs older).
func (s *Session) CanPublishSeq(seq uint64) bool {
	_, used := s.byID[IDOf(seq)]
	return s.CanPublish() && !used
}

// IDOf is the packet id of the flow of message seq (seq ≥ 1): seqs 1 to
// 65535 get ids 1 to 65535, and so on around. Deriving the id from the seq
// is what lets a flow's PUBLISH leave before any record of it is durable
// (see the package doc).
func IDOf(seq uint64) uint16 { return uint16((seq-1)%65535) + 1 }

// Publish starts a flow for message seq with packet id IDOf(seq) (seqs must
// increase from call to call and exceed every restored one). Topic and
// payload are copied into a buffer the session reuses. Its record needs no
// sync (see the package doc) unless the id's previous flow finished since
// the last sync. It panics unless CanPublishSeq(seq).
func (s *Session) Publish(seq uint64, topic, payload []byte, retain bool) {
	if !s.CanPublishSeq(seq) {
		panic("qos2: Publish without CanPublishSeq")
	}
	if n := len(s.flows); n > 0 && s.flows[n-1].seq >= seq {
		panic(fmt.Sprintf("qos2: Publish seq %d not above %d", seq, s.flows[n-1].seq))
	}
	f := s.newFlow()
	f.seq, f.id, f.step, f.retain, f.loaded = seq, IDOf(seq), StepPublishSent, retain, true
	f.topic = append(f.topic[:0], topic...)
	f.payload = append(f.payload[:0], payload...)
	s.flows = append(s.flows, f)
	s.byID[f.id] = f
	_, reused := s.doneUnsynced[f.id]
	s.record(Record{Seq: f.seq, ID: f.id, Step: StepPublishSent}, reused)
	s.queue(Packet{Kind: PacketPublish, ID: f.id, Retain: retain, Seq: seq, Topic: f.topic, Payload: f.payload})
}

// PacketType is an incoming packet's type for Step.
type PacketType uint8

const (
	_ PacketType = iota // the zero value: invalid
	// Pubrec is a PUBREC.
	Pubrec
	// Pubcomp is a PUBCOMP.
	Pubcomp
	// Pingresp is a PINGRESP.
	Pingresp
	// Puback is a PUBACK: a broker that answers a QoS 2 PUBLISH so has
	// taken the message at QoS 1 (delivered it, forgotten the id).
	Puback
)

// Step feeds one packet from the broker. A PUBREC or PUBCOMP for an id
// without an open flow is ignored. Such a PUBREC is a late repeat for a
// finished flow (the broker holds nothing under the id), or it is for a
// flow whose PUBLISH went out before a crash with no durable record of it:
// the publisher will send that message again under the same id, and a
// PUBREL now would release it at the broker first, making the re-send a
// second message.
func (s *Session) Step(typ PacketType, id uint16) error {
	switch typ {
	case Pubrec:
		f := s.byID[id]
		if f == nil {
			return nil
		}
		s.answered(f)
		if f.step == StepPublishSent {
			f.step = StepPubrecReceived
			s.record(Record{Seq: f.seq, ID: id, Step: StepPubrecReceived}, true)
			// The payload is no longer needed: the flow only ever gets PUBREL.
		}
		s.queue(Packet{Kind: PacketPubrel, ID: id, Seq: f.seq})
	case Puback:
		// A downgrade to QoS 1: the broker has the message and keeps no
		// QoS 2 state for the id, so the flow ends here as after a
		// PUBCOMP. A flow past its PUBREC cannot be PUBACKed.
		f := s.byID[id]
		if f == nil || f.step != StepPublishSent {
			return nil
		}
		s.complete(f)
	case Pubcomp:
		f := s.byID[id]
		if f == nil {
			return nil
		}
		s.complete(f)
	case Pingresp:
		s.pingPending = false
	default:
		return fmt.Errorf("%w: unexpected packet type %d", ErrProtocol, typ)
	}
	return nil
}

// complete ends flow f: the broker has its message and the id is free.
func (s *Session) complete(f *flow) {
	id := f.id
	s.answered(f)
	s.record(Record{Seq: f.seq, ID: id, Step: StepPubcompReceived}, false)
	s.doneUnsynced[id] = struct{}{}
	s.rd.Completed = append(s.rd.Completed, Completion{Seq: f.seq, Bytes: len(f.topic) + len(f.payload)})
	delete(s.byID, id)
	i := slices.Index(s.flows, f)
	s.flows = slices.Delete(s.flows, i, i+1)
	s.free = append(s.free, f)
	if j := slices.IndexFunc(s.flows, func(f *flow) bool { return f.parked }); j >= 0 && s.connected {
		s.flows[j].parked = false
		s.resume(s.flows[j])
	}
}

// Received tells the session that bytes from the broker arrived at at: any
// packet, or any part of one, proves the connection alive (see Tick). The
// driver calls it for what it read since the last call, at the latest
// before each Tick; a time before one already given changes nothing.
// Without it the session knows only of PINGRESPs and judges by them alone.
func (s *Session) Received(at time.Time) {
	if at.After(s.lastRecv) {
		s.lastRecv = at
	}
}

// Tick advances the session's clock: it queues a PINGREQ when nothing was
// sent for KeepAlive, and disconnects (Ready.Disconnect) when that PINGREQ
// is unanswered and nothing at all has arrived from the broker (Received)
// for KeepAlive since the later of the PINGREQ and the last bytes.
//
// A late PINGRESP alone is no sign of a dead connection: a broker starved
// of CPU reads a client's packets a few at a time, so a PINGREQ sent
// behind a window of PUBLISHes and PUBRELs is answered only after all of
// them, while the PUBRECs, PUBCOMPs and PUBACKs for them keep coming.
// Dropping such a connection would throw away the broker's progress and
// re-send the window on the next one, under the same load: a reconnect
// loop. A broker that sends nothing at all is still dropped: at the first
// Tick at or after KeepAlive past the later of the PINGREQ and its last
// bytes, and the PINGREQ leaves at the first Tick at or after KeepAlive
// without sending, so within 2 × KeepAlive (plus twice the driver's tick
// interval) of the later of the last packet sent and the last bytes
// received.
func (s *Session) Tick(now time.Time) {
	if !s.connected || s.cfg.KeepAlive <= 0 {
		return
	}
	if s.pingPending && now.Sub(later(s.pingSentAt, s.lastRecv)) >= s.cfg.KeepAlive {
		s.Disconnected()
		s.rd.Disconnect = true
		return
	}
	if !s.pingPending && now.Sub(s.lastSent) >= s.cfg.KeepAlive {
		s.pingPending = true
		s.pingSentAt = now
		s.queue(Packet{Kind: PacketPingreq})
	}
}

// Sent tells the session packets went out at now (resets the keepalive).
func (s *Session) Sent(now time.Time) { s.lastSent = now }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// HasReady reports whether Ready has work.
func (s *Session) HasReady() bool {
	return len(s.rd.Records) > 0 || len(s.rd.Packets) > 0 || len(s.rd.Completed) > 0 || s.rd.Disconnect
}

// Ready returns the pending work; call Advance when it is done, before the
// next Ready.
func (s *Session) Ready() Ready {
	if s.inReady {
		panic("qos2: Ready called twice without Advance")
	}
	s.inReady = true
	return s.rd
}

// DropPackets tells the session the pending Ready's packets were not sent
// (the connection was gone): Advance then takes its records as persisted
// but no packet as sent. The driver calls Disconnected next.
func (s *Session) DropPackets() { s.rd.Packets = s.rd.Packets[:0] }

// Advance tells the session the last Ready was persisted and sent.
func (s *Session) Advance() {
	if !s.inReady {
		panic("qos2: Advance without Ready")
	}
	s.inReady = false
	if s.rd.MustSync {
		clear(s.doneUnsynced) // their records came before: durable now
	}
	for _, p := range s.rd.Packets {
		if f := s.byID[p.ID]; f != nil && p.Kind == PacketPubrel && f.seq == p.Seq {
			f.released = true
		}
		if f := s.byID[p.ID]; f != nil && !f.out && (p.Kind == PacketPublish || p.Kind == PacketPubrel) && f.seq == p.Seq {
			f.out = true
			s.awaiting++
			if f.step == StepPubrecReceived {
				s.releasing++
			}
		}
	}
	s.rd.Records = s.rd.Records[:0]
	s.rd.Packets = s.rd.Packets[:0]
	s.rd.Completed = s.rd.Completed[:0]
	s.rd.MustSync, s.rd.Disconnect = false, false
}

func (s *Session) record(r Record, mustSync bool) {
	s.rd.Records = append(s.rd.Records, r)
	s.rd.MustSync = s.rd.MustSync || mustSync
}

func (s *Session) queue(p Packet) {
	if !s.connected {
		return
	}
	s.rd.Packets = append(s.rd.Packets, p)
}

func (s *Session) newFlow() *flow {
	if n := len(s.free); n > 0 {
		f := s.free[n-1]
		s.free = s.free[:n-1]
		f.loaded, f.retain, f.parked, f.out, f.released = false, false, false, false, false
		f.topic, f.payload = f.topic[:0], f.payload[:0]
		return f
	}
	return &flow{}
}

// TakeID returns the packet id *next, or the first after it that used
// does not report, and moves *next past it, cycling through 1..65535 so a
// freed id is reused as late as possible. *next must not be 0; at least
// one id must be free.
func TakeID(next *uint16, used func(uint16) bool) uint16 {
	for {
		id := *next
		*next++
		if *next == 0 {
			*next = 1
		}
		if !used(id) {
			return id
		}
	}
}
