package qos2

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

// trace renders a Ready as one line: records, then packets, so a test can
// check both and their order.
func trace(rd Ready) string {
	var b strings.Builder
	for _, r := range rd.Records {
		fmt.Fprintf(&b, "rec(%d,%d,%s) ", r.Seq, r.ID, r.Step)
	}
	if rd.MustSync {
		b.WriteString("sync ")
	}
	for _, p := range rd.Packets {
		switch p.Kind {
		case PacketPublish:
			fmt.Fprintf(&b, "PUBLISH(%d,%s", p.ID, p.Payload)
			if p.Dup {
				b.WriteString(",dup")
			}
			b.WriteString(") ")
		case PacketPubrel:
			fmt.Fprintf(&b, "PUBREL(%d) ", p.ID)
		case PacketPingreq:
			b.WriteString("PINGREQ ")
		}
	}
	for _, c := range rd.Completed {
		fmt.Fprintf(&b, "done(%d) ", c.Seq)
	}
	if rd.Disconnect {
		b.WriteString("disconnect ")
	}
	return strings.TrimSpace(b.String())
}

func ready(t *testing.T, s *Session) string {
	t.Helper()
	if !s.HasReady() {
		return ""
	}
	rd := s.Ready()
	out := trace(rd)
	s.Advance()
	return out
}

func pub(s *Session, seq uint64) {
	s.Publish(seq, []byte("t"), fmt.Appendf(nil, "m%d", seq), false)
}

func TestSession_Flow(t *testing.T) {
	type op struct {
		do   func(s *Session)
		want string
	}
	tests := []struct {
		name string
		cfg  Config
		ops  []op
	}{
		{
			name: "full flow: PUBREC synced before the PUBREL; PUBLISH and PUBCOMP recorded without a sync",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { pub(s, 1); pub(s, 2) }, "rec(1,1,publish-sent) rec(2,2,publish-sent) PUBLISH(1,m1) PUBLISH(2,m2)"},
				{func(s *Session) { s.Step(Pubrec, 1); s.Step(Pubrec, 2) }, "rec(1,1,pubrec-received) rec(2,2,pubrec-received) sync PUBREL(1) PUBREL(2)"},
				{func(s *Session) { s.Step(Pubcomp, 1) }, "rec(1,1,pubcomp-received) done(1)"},
				{func(s *Session) { s.Step(Pubcomp, 2) }, "rec(2,2,pubcomp-received) done(2)"},
			},
		},
		{
			name: "duplicate PUBREC re-sends PUBREL without a new record",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { pub(s, 1) }, "rec(1,1,publish-sent) PUBLISH(1,m1)"},
				{func(s *Session) { s.Step(Pubrec, 1) }, "rec(1,1,pubrec-received) sync PUBREL(1)"},
				{func(s *Session) { s.Step(Pubrec, 1) }, "PUBREL(1)"},
				{func(s *Session) { s.Step(Pubcomp, 1); s.Step(Pubcomp, 1) }, "rec(1,1,pubcomp-received) done(1)"},
			},
		},
		{
			// A PUBREL would release a message whose flow is to be re-sent
			// under that id (PUBLISH out, no record durable before a crash).
			name: "unknown PUBREC and PUBCOMP ignored",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { s.Step(Pubrec, 77); s.Step(Pubcomp, 78) }, ""},
			},
		},
		{
			name: "reconnect resumes PUBLISH with DUP and the same id, PUBREL for released flows, in seq order",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { pub(s, 1); pub(s, 2); pub(s, 3) }, "rec(1,1,publish-sent) rec(2,2,publish-sent) rec(3,3,publish-sent) PUBLISH(1,m1) PUBLISH(2,m2) PUBLISH(3,m3)"},
				{func(s *Session) { s.Step(Pubrec, 2) }, "rec(2,2,pubrec-received) sync PUBREL(2)"},
				{func(s *Session) { s.Disconnected() }, ""},
				{func(s *Session) { s.Connected(t0) }, "PUBLISH(1,m1,dup) PUBREL(2) PUBLISH(3,m3,dup)"},
			},
		},
		{
			// A PUBREC is no proof the broker kept the message (mosquitto
			// answers one for a PUBLISH over its limit and drops it):
			// while no PUBREL has left, the flow is published again.
			name: "a PUBREC whose PUBREL never left: the flow is published again after a disconnect",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { pub(s, 1); pub(s, 2) }, "rec(1,1,publish-sent) rec(2,2,publish-sent) PUBLISH(1,m1) PUBLISH(2,m2)"},
				{func(s *Session) { s.Step(Pubrec, 1); s.Step(Pubrec, 2); s.Disconnected() }, "rec(1,1,pubrec-received) rec(2,2,pubrec-received) rec(1,1,publish-sent) rec(2,2,publish-sent) sync"},
				{func(s *Session) { s.Connected(t0) }, "PUBLISH(1,m1,dup) PUBLISH(2,m2,dup)"},
				{func(s *Session) { s.Step(Pubrec, 1) }, "rec(1,1,pubrec-received) sync PUBREL(1)"},
			},
		},
		{
			name: "a restored flow at PUBREC gets PUBREL, never a PUBLISH (an earlier run may have released it)",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) {
					_ = s.Restore([]Record{{Seq: 4, ID: 4, Step: StepPubrecReceived}})
					s.Connected(t0)
				}, "PUBREL(4)"},
				{func(s *Session) { s.Disconnected(); s.Connected(t0) }, "PUBREL(4)"},
			},
		},
		{
			name: "a PUBACK (a broker that downgrades QoS 2 to 1) ends a flow at PUBLISH, not one at PUBREL",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { pub(s, 1); pub(s, 2) }, "rec(1,1,publish-sent) rec(2,2,publish-sent) PUBLISH(1,m1) PUBLISH(2,m2)"},
				{func(s *Session) { s.Step(Pubrec, 2) }, "rec(2,2,pubrec-received) sync PUBREL(2)"},
				{func(s *Session) { s.Step(Puback, 1); s.Step(Puback, 2) }, "rec(1,1,pubcomp-received) done(1)"},
			},
		},
		{
			name: "a smaller window: no new flow until below it; flows beyond it parked at the next connect",
			cfg:  Config{MaxInflight: 4},
			ops: []op{
				{func(s *Session) {
					for seq := uint64(1); s.CanPublish(); seq++ {
						pub(s, seq)
					}
				}, "rec(1,1,publish-sent) rec(2,2,publish-sent) rec(3,3,publish-sent) rec(4,4,publish-sent) PUBLISH(1,m1) PUBLISH(2,m2) PUBLISH(3,m3) PUBLISH(4,m4)"},
				{func(s *Session) { s.Disconnected(); s.SetWindow(2); s.Connected(t0) }, "PUBLISH(1,m1,dup) PUBLISH(2,m2,dup)"},
				{func(s *Session) { s.Step(Pubrec, 1) }, "rec(1,1,pubrec-received) sync PUBREL(1)"},
				{func(s *Session) { s.Step(Pubcomp, 1) }, "rec(1,1,pubcomp-received) PUBLISH(3,m3,dup) done(1)"},
				{func(s *Session) {
					if s.CanPublish() || s.Window() != 2 {
						panic("window")
					}
					s.SetWindow(100)
					if s.Window() != 4 {
						panic("window above MaxInflight")
					}
				}, ""},
			},
		},
		{
			name: "records are kept, packets dropped, across a disconnect",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { pub(s, 1); s.Disconnected() }, "rec(1,1,publish-sent)"},
				{func(s *Session) { s.Connected(t0) }, "PUBLISH(1,m1,dup)"},
			},
		},
		{
			name: "max inflight",
			cfg:  Config{MaxInflight: 2},
			ops: []op{
				{func(s *Session) {
					for seq := uint64(1); s.CanPublish(); seq++ {
						pub(s, seq)
					}
				}, "rec(1,1,publish-sent) rec(2,2,publish-sent) PUBLISH(1,m1) PUBLISH(2,m2)"},
				{func(s *Session) { s.Step(Pubrec, 1) }, "rec(1,1,pubrec-received) sync PUBREL(1)"},
				{func(s *Session) {
					if s.CanPublish() {
						panic("a PUBREC does not free a slot")
					}
					s.Step(Pubcomp, 1)
					pub(s, 3)
				}, "rec(1,1,pubcomp-received) rec(3,3,publish-sent) PUBLISH(3,m3) done(1)"},
			},
		},
		{
			// Seq 65536 takes id 1 again: seq 1's PUBCOMP record must be
			// durable before its PUBLISH, or a crash could resume seq 1 at
			// PUBREL, releasing seq 65536's message under id 1 before it
			// is sent again.
			name: "an id reused before its last flow's PUBCOMP record is synced syncs first",
			cfg:  Config{MaxInflight: 10},
			ops: []op{
				{func(s *Session) { pub(s, 1) }, "rec(1,1,publish-sent) PUBLISH(1,m1)"},
				{func(s *Session) { s.Step(Pubrec, 1) }, "rec(1,1,pubrec-received) sync PUBREL(1)"},
				{func(s *Session) { s.Step(Pubcomp, 1) }, "rec(1,1,pubcomp-received) done(1)"},
				{func(s *Session) { pub(s, 65536) }, "rec(65536,1,publish-sent) sync PUBLISH(1,m65536)"},
				{func(s *Session) { s.Step(Pubrec, 1); s.Step(Pubcomp, 1) }, "rec(65536,1,pubrec-received) rec(65536,1,pubcomp-received) sync PUBREL(1) done(65536)"},
				// Synced with the PUBREC record of the same Ready: no sync.
				{func(s *Session) { pub(s, 131071) }, "rec(131071,1,publish-sent) PUBLISH(1,m131071)"},
			},
		},
		{
			name: "keepalive: PINGREQ after idle; a PINGRESP late with nothing else from the broker disconnects",
			cfg:  Config{MaxInflight: 1, KeepAlive: 10 * time.Second},
			ops: []op{
				{func(s *Session) { s.Tick(t0.Add(9 * time.Second)) }, ""},
				{func(s *Session) { s.Tick(t0.Add(10 * time.Second)) }, "PINGREQ"},
				{func(s *Session) {
					s.Received(t0.Add(10 * time.Second))
					s.Step(Pingresp, 0)
					s.Sent(t0.Add(10 * time.Second))
					s.Tick(t0.Add(19 * time.Second))
				}, ""},
				{func(s *Session) { s.Tick(t0.Add(20 * time.Second)) }, "PINGREQ"},
				{func(s *Session) { s.Tick(t0.Add(30*time.Second - time.Nanosecond)) }, ""},
				{func(s *Session) { s.Tick(t0.Add(30 * time.Second)) }, "disconnect"},
			},
		},
		{
			name: "keepalive: acks while the PINGRESP is overdue keep the connection; silence after them disconnects",
			cfg:  Config{MaxInflight: 2, KeepAlive: 10 * time.Second},
			ops: []op{
				{func(s *Session) { pub(s, 1); pub(s, 2); s.Sent(t0) }, "rec(1,1,publish-sent) rec(2,2,publish-sent) PUBLISH(1,m1) PUBLISH(2,m2)"},
				{func(s *Session) { s.Tick(t0.Add(10 * time.Second)) }, "PINGREQ"},
				{func(s *Session) {
					s.Received(t0.Add(19 * time.Second))
					s.Step(Pubrec, 1)
				}, "rec(1,1,pubrec-received) sync PUBREL(1)"},
				// The PINGRESP is a keepalive late: the PUBREC a second
				// ago proves the broker alive.
				{func(s *Session) { s.Sent(t0.Add(19 * time.Second)); s.Tick(t0.Add(20 * time.Second)) }, ""},
				{func(s *Session) {
					s.Received(t0.Add(28 * time.Second))
					s.Step(Pubcomp, 1)
				}, "rec(1,1,pubcomp-received) done(1)"},
				{func(s *Session) { s.Tick(t0.Add(37 * time.Second)) }, ""},
				// Nothing for a keepalive since the PUBCOMP.
				{func(s *Session) { s.Tick(t0.Add(38 * time.Second)) }, "disconnect"},
			},
		},
		{
			name: "keepalive: bytes before the PINGREQ do not extend its wait; an older time does not move the clock back",
			cfg:  Config{MaxInflight: 1, KeepAlive: 10 * time.Second},
			ops: []op{
				{func(s *Session) { s.Received(t0.Add(5 * time.Second)); s.Tick(t0.Add(10 * time.Second)) }, "PINGREQ"},
				{func(s *Session) { s.Received(t0.Add(15 * time.Second)); s.Received(t0.Add(12 * time.Second)) }, ""},
				{func(s *Session) { s.Tick(t0.Add(24 * time.Second)) }, ""},
				{func(s *Session) { s.Tick(t0.Add(25 * time.Second)) }, "disconnect"},
			},
		},
		{
			name: "keepalive: a late PINGRESP ends the wait; the next PINGREQ waits for a keepalive without sending",
			cfg:  Config{MaxInflight: 1, KeepAlive: 10 * time.Second},
			ops: []op{
				{func(s *Session) { s.Tick(t0.Add(10 * time.Second)); s.Sent(t0.Add(10 * time.Second)) }, "PINGREQ"},
				{func(s *Session) { s.Received(t0.Add(18 * time.Second)); s.Tick(t0.Add(25 * time.Second)) }, ""},
				{func(s *Session) { s.Received(t0.Add(26 * time.Second)); s.Step(Pingresp, 0) }, ""},
				{func(s *Session) { pub(s, 1); s.Sent(t0.Add(27 * time.Second)); s.Tick(t0.Add(36 * time.Second)) }, "rec(1,1,publish-sent) PUBLISH(1,m1)"},
				{func(s *Session) { s.Tick(t0.Add(37 * time.Second)); s.Sent(t0.Add(37 * time.Second)) }, "PINGREQ"},
				{func(s *Session) { s.Tick(t0.Add(47 * time.Second)) }, "disconnect"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.cfg)
			s.Connected(t0)
			for i, o := range tt.ops {
				o.do(s)
				if got := ready(t, s); got != o.want {
					t.Errorf("step %d:\n got %q\nwant %q", i, got, o.want)
				}
			}
		})
	}
}

// TestSession_Restore: after a restart, each flow resumes at its recorded
// step with its original id: PUBLISH (DUP) for "PUBLISH sent", PUBREL — never
// a PUBLISH, paho's issue 788 — for "PUBREC received".
func TestSession_Restore(t *testing.T) {
	s := New(Config{MaxInflight: 10})
	err := s.Restore([]Record{
		{Seq: 9, ID: 65535, Step: StepPubrecReceived},
		{Seq: 10, ID: 1, Step: StepPublishSent},
		{Seq: 8, ID: 65534, Step: StepPubcompReceived},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.NeedsMessage()); got != "[10]" {
		t.Fatalf("NeedsMessage = %s, want [10]", got)
	}
	s.SetMessage(10, []byte("t"), []byte("m10"), false)
	s.Connected(t0)
	if got, want := ready(t, s), "PUBREL(65535) PUBLISH(1,m10,dup)"; got != want {
		t.Errorf("resume: got %q want %q", got, want)
	}
	// A new flow's id is its seq's; one held by a restored flow waits.
	pub(s, 11)
	if got, want := ready(t, s), "rec(11,11,publish-sent) PUBLISH(11,m11)"; got != want {
		t.Errorf("new flow: got %q want %q", got, want)
	}
	if s.CanPublishSeq(65535 + 1) { // id 1: restored seq 10's
		t.Error("CanPublishSeq for an id an open flow holds")
	}
	if s.Retried() != 2 {
		t.Errorf("Retried = %d, want 2", s.Retried())
	}
}

// TestSession_Restore_BeyondMaxInflight: flows restored under a smaller
// limit than the run that opened them resume MaxInflight at a time, the
// next one as each earlier flow ends, and again so after a reconnect.
func TestSession_Restore_BeyondMaxInflight(t *testing.T) {
	s := New(Config{MaxInflight: 2})
	err := s.Restore([]Record{
		{Seq: 1, ID: 1, Step: StepPubrecReceived},
		{Seq: 2, ID: 2, Step: StepPublishSent},
		{Seq: 3, ID: 3, Step: StepPubrecReceived},
		{Seq: 4, ID: 4, Step: StepPublishSent},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{2, 4} {
		s.SetMessage(seq, []byte("t"), fmt.Appendf(nil, "m%d", seq), false)
	}
	steps := []struct {
		do   func()
		want string
	}{
		{func() { s.Connected(t0) }, "PUBREL(1) PUBLISH(2,m2,dup)"},
		{func() { s.Step(Pubcomp, 1) }, "rec(1,1,pubcomp-received) PUBREL(3) done(1)"},
		{func() { s.Disconnected(); s.Connected(t0) }, "PUBLISH(2,m2,dup) PUBREL(3)"},
		{func() { s.Step(Pubrec, 2) }, "rec(2,2,pubrec-received) sync PUBREL(2)"},
		{func() { s.Step(Pubcomp, 2) }, "rec(2,2,pubcomp-received) PUBLISH(4,m4,dup) done(2)"},
	}
	for i, st := range steps {
		st.do()
		if got := ready(t, s); got != st.want {
			t.Errorf("step %d: got %q want %q", i, got, st.want)
		}
		if s.CanPublish() {
			t.Errorf("step %d: CanPublish with %d flows open, limit 2", i, s.Inflight())
		}
	}
}

func TestSession_Restore_Invalid(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
	}{
		{"id zero", []Record{{Seq: 1, ID: 0, Step: StepPublishSent}}},
		{"id twice", []Record{{Seq: 1, ID: 5, Step: StepPublishSent}, {Seq: 2, ID: 5, Step: StepPublishSent}}},
		{"bad step", []Record{{Seq: 1, ID: 5, Step: 9}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := New(Config{MaxInflight: 10}).Restore(tt.recs); err == nil {
				t.Error("Restore accepted invalid records")
			}
		})
	}
}

// TestSession_IDsNeverReusedWhileOpen cycles through the id space many times
// with flows finishing out of order; CanPublishSeq keeps a seq whose id is
// held from starting.
func TestSession_IDsNeverReusedWhileOpen(t *testing.T) {
	s := New(Config{MaxInflight: 1000})
	s.Connected(t0)
	open := map[uint16]uint64{}
	seq := uint64(0)
	for round := range 300 {
		for s.CanPublishSeq(seq + 1) {
			seq++
			pub(s, seq)
		}
		rd := s.Ready()
		for _, r := range rd.Records {
			if r.Step != StepPublishSent {
				continue
			}
			if other, used := open[r.ID]; used {
				t.Fatalf("round %d: id %d given to seq %d while seq %d is open", round, r.ID, r.Seq, other)
			}
			open[r.ID] = r.Seq
		}
		s.Advance()
		// Finish every other open flow, odd ids first.
		for id := range open {
			if int(id)%2 == round%2 {
				s.Step(Pubrec, id)
				s.Step(Pubcomp, id)
				delete(open, id)
			}
		}
		s.Ready()
		s.Advance()
	}
	if seq < 65535*2 {
		t.Fatalf("only %d messages: the id space did not wrap", seq)
	}
}

func TestSession_AllocsPerMessage(t *testing.T) {
	s := New(Config{MaxInflight: 100})
	s.Connected(t0)
	topic, payload := []byte("up/x"), make([]byte, 200)
	seq := uint64(0)
	cycle := func() {
		for s.CanPublish() {
			seq++
			s.Publish(seq, topic, payload, false)
		}
		s.Ready()
		s.Advance()
		for _, f := range s.flows {
			s.Step(Pubrec, f.id)
		}
		s.Ready()
		s.Advance()
		for len(s.flows) > 0 {
			s.Step(Pubcomp, s.flows[0].id)
		}
		s.Ready()
		s.Advance()
	}
	cycle()
	if a := testing.AllocsPerRun(20, cycle); a > 0 {
		t.Errorf("%.1f allocations per 100-message cycle, want 0", a)
	}
}

// TestSession_Awaiting counts the flows whose packet is out and not
// answered: not before the Ready holding it is Advanced, no longer after
// the answer, again after the PUBREL goes, none after a disconnect; and
// among them (Releasing) those whose packet out is a PUBREL.
func TestSession_Awaiting(t *testing.T) {
	s := New(Config{MaxInflight: 5})
	s.Connected(t0)
	check := func(step string, want int, wantRecords bool, wantReleasing int) {
		t.Helper()
		if got := s.Awaiting(); got != want {
			t.Errorf("%s: Awaiting = %d, want %d", step, got, want)
		}
		if got := s.Releasing(); got != wantReleasing {
			t.Errorf("%s: Releasing = %d, want %d", step, got, wantReleasing)
		}
		if got := s.HasRecords(); got != wantRecords {
			t.Errorf("%s: HasRecords = %v, want %v", step, got, wantRecords)
		}
	}
	pub(s, 1)
	pub(s, 2)
	pub(s, 3)
	check("published, not sent", 0, true, 0)
	ready(t, s)
	check("sent", 3, false, 0)
	if err := s.Step(Pubrec, 1); err != nil {
		t.Fatal(err)
	}
	check("PUBREC of 1", 2, true, 0)
	if err := s.Step(Pubrec, 99); err != nil { // unknown id: ignored
		t.Fatal(err)
	}
	ready(t, s)
	check("PUBREL of 1 sent", 3, false, 1)
	if err := s.Step(Pubcomp, 1); err != nil {
		t.Fatal(err)
	}
	check("PUBCOMP of 1", 2, true, 0)
	ready(t, s)
	s.Disconnected()
	check("disconnected", 0, false, 0)
	s.Connected(t0)
	ready(t, s)
	check("resumed", 2, false, 0)
}

// TestSession_KeepaliveStarvedBroker models a broker starved of CPU: after
// a stall of more than a keepalive it takes the client's packets one every
// 500 ms, in the order sent, and answers each at once. The PINGREQ the
// stall brought waits behind the window of 200 PUBLISHes, the next one
// behind 200 PUBRELs: each is answered over a minute late while PUBRECs
// and PUBCOMPs keep coming, and the connection stays up until every flow
// is complete. Then the broker goes silent, and the session disconnects a
// keepalive after the PINGREQ that follows (at a tick), within the bound
// Tick states.
func TestSession_KeepaliveStarvedBroker(t *testing.T) {
	const (
		keepAlive = 4 * time.Second
		tick      = time.Second // the driver ticks at keepalive / 4
		step      = 100 * time.Millisecond
		stall     = 5 * time.Second
		perPacket = 500 * time.Millisecond
		window    = 200
	)
	s := New(Config{MaxInflight: window, KeepAlive: keepAlive})
	now := t0
	s.Connected(now)
	type packet struct {
		kind PacketKind
		id   uint16
		at   time.Time // sent
	}
	var (
		queue        []packet // at the broker, not read yet
		done         int
		pings        int
		worstLate    time.Duration // the latest PINGRESP, after its PINGREQ
		lastSent     time.Time
		lastRecv     = now
		disconnected time.Time
	)
	// drive is the driver's part: persist, send, advance.
	drive := func() {
		if !s.HasReady() {
			return
		}
		rd := s.Ready()
		for _, p := range rd.Packets {
			queue = append(queue, packet{p.Kind, p.ID, now})
			if p.Kind == PacketPingreq {
				pings++
			}
		}
		if len(rd.Packets) > 0 {
			s.Sent(now)
			lastSent = now
		}
		done += len(rd.Completed)
		if rd.Disconnect {
			disconnected = now
		}
		s.Advance()
	}
	for seq := uint64(1); seq <= window; seq++ {
		pub(s, seq)
	}
	drive()
	silent := false
	nextTake := t0.Add(stall)
	for disconnected.IsZero() {
		now = now.Add(step)
		if now.Sub(t0) > 10*time.Minute {
			t.Fatalf("still connected after %v: %d of %d flows done", now.Sub(t0), done, window)
		}
		if !silent && len(queue) > 0 && !now.Before(nextTake) {
			p := queue[0]
			queue = queue[1:]
			nextTake = now.Add(perPacket)
			s.Received(now)
			lastRecv = now
			var err error
			switch p.kind {
			case PacketPublish:
				err = s.Step(Pubrec, p.id)
			case PacketPubrel:
				err = s.Step(Pubcomp, p.id)
			case PacketPingreq:
				worstLate = max(worstLate, now.Sub(p.at))
				err = s.Step(Pingresp, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			drive()
		}
		if done == window && len(queue) == 0 {
			silent = true
		}
		if now.Sub(t0)%tick == 0 {
			s.Tick(now)
			drive()
		}
	}
	if done != window || !silent {
		t.Fatalf("disconnected at %v with %d of %d flows done (broker silent: %v)", disconnected.Sub(t0), done, window, silent)
	}
	if pings < 3 || worstLate < 10*keepAlive {
		t.Fatalf("%d PINGREQs, the latest answered %v after it: the broker was not starved enough to test anything", pings, worstLate)
	}
	quiet := disconnected.Sub(lastRecv)
	if bound := 2*keepAlive + 2*tick; quiet < keepAlive || disconnected.Sub(later(lastSent, lastRecv)) > bound {
		t.Fatalf("disconnected %v after the broker's last bytes (%v after the last packet either way), want at least %v and within %v",
			quiet, disconnected.Sub(later(lastSent, lastRecv)), keepAlive, bound)
	}
	t.Logf("%d flows over %v with PINGRESPs up to %v late; silent broker dropped %v after its last bytes",
		window, lastRecv.Sub(t0), worstLate, quiet)
}
