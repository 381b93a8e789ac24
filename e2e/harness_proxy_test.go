package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mqttProxy relays an MQTT client's TCP connections to a broker, packet by
// packet. It can swallow some of the client's PUBACKs, as a process killed
// right after writing them loses them: the broker never sees the
// acks of messages the agent logged, and must send them again after the
// resume (loseAcks). With a trace path it also writes every PUBLISH and PUBACK both
// ways, one line each: time, connection, direction, packet, packet id,
// DUP, the reading's seq. It also records a QoS 2 publisher's flows
// (PUBLISH, PUBREC, PUBREL, PUBCOMP, with the result id a PUBLISH carries),
// and can cut every connection and refuse new ones for a while (pause).
type mqttProxy struct {
	ln     net.Listener
	broker string
	toLose atomic.Int64 // PUBACKs still to swallow
	held   atomic.Int64 // PUBACKs swallowed
	paused atomic.Bool
	last   atomic.Int64 // when the last event was recorded (Unix ns)

	mu     sync.Mutex
	out    *bufio.Writer // nil: no trace file
	conns  int
	events []proxyEvent
	live   map[net.Conn]bool // both sides of the open connections
}

// proxyEvent is a PUBLISH, PUBACK, PUBREC, PUBREL or PUBCOMP the proxy
// saw (kind: the packet type): conn numbers the client's connections from
// 1; toAgent is the broker's side; lost marks a PUBLISH the broker wrote
// after the agent's side had closed (it never reached the agent); seq is
// the reading's (-1 for none), result the id of a result the agent
// published ("" for none). kind pktEnd marks where one side's input of a
// connection ended: toAgent for the broker's side (eof: the broker closed
// the socket with nothing of the agent's left unread; else a reset, or the
// proxy stopped waiting), else the agent's.
type proxyEvent struct {
	conn    int
	kind    byte
	toAgent bool
	publish bool
	lost    bool
	eof     bool
	id      uint16
	seq     int
	result  string
}

// MQTT control packet types the proxy records.
const (
	pktPublish = 3
	pktPuback  = 4
	pktPubrec  = 5
	pktPubrel  = 6
	pktPubcomp = 7
	pktEnd     = 16 // not an MQTT packet: one side's input ended
)

// startMQTTProxy listens on loopback and relays to broker (host:port). trace,
// if not "", is the file the trace goes to.
func startMQTTProxy(t *testing.T, broker, trace string) *mqttProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &mqttProxy{ln: ln, broker: broker, live: map[net.Conn]bool{}}
	if trace != "" {
		f, err := os.Create(trace)
		if err != nil {
			t.Fatal(err)
		}
		p.out = bufio.NewWriterSize(f, 1<<20)
		t.Cleanup(func() { p.flush(); f.Close() })
	}
	t.Cleanup(func() { ln.Close() })
	go p.accept()
	return p
}

func (p *mqttProxy) URL() string { return "tcp://" + p.ln.Addr().String() }

func (p *mqttProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.paused.Load() {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", p.broker)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns++
		n := p.conns
		p.live[c], p.live[b] = true, true
		p.mu.Unlock()
		go p.relay(n, "B>A", b, c)
		go p.relay(n, "A>B", c, b)
	}
}

// pause closes every connection the proxy relays and refuses new ones
// until resume: the client sees its broker unreachable.
func (p *mqttProxy) pause() {
	p.paused.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.live {
		c.Close()
	}
}

// connections is how many connections the proxy has relayed so far.
func (p *mqttProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

// open reports whether a connection is being relayed (the client is
// connected to the broker through the proxy).
func (p *mqttProxy) open() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live) > 0
}

// resume lets connections in again.
func (p *mqttProxy) resume() { p.paused.Store(false) }

var (
	traceSeq    = regexp.MustCompile(`"seq":(-?\d+)`)
	traceResult = regexp.MustCompile(`"id":"([^"]*)"`)
)

// relay copies packets from one side to the other until either fails. When
// the agent's side fails, what the broker still writes is read to its end
// and recorded as lost: the broker took those messages as sent on this
// connection (their packet ids are in its session), though the agent never
// got them.
func (p *mqttProxy) relay(n int, dir string, from, to net.Conn) {
	if dir == "B>A" {
		// This side closes both connections, once the broker is done.
		defer func() {
			from.Close()
			to.Close()
			p.mu.Lock()
			delete(p.live, from)
			delete(p.live, to)
			p.mu.Unlock()
		}()
	}
	r := bufio.NewReaderSize(from, 1<<16)
	lost := false
	for {
		pkt, err := readPacket(r)
		if err != nil {
			p.record(proxyEvent{conn: n, kind: pktEnd, toAgent: dir == "B>A", eof: errors.Is(err, io.EOF), seq: -1})
			if dir == "A>B" {
				// The agent is gone: the broker sees the end of its
				// input, and the other side reads what it still sends.
				if tc, ok := to.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				_ = to.SetReadDeadline(time.Now().Add(10 * time.Second))
			}
			return
		}
		body := pkt[len(pkt)-packetBodyLen(pkt):]
		switch pkt[0] >> 4 {
		case 3: // PUBLISH
			if len(body) >= 2 {
				tl := int(binary.BigEndian.Uint16(body))
				rest, id := body[min(2+tl, len(body)):], 0
				if (pkt[0]>>1)&3 > 0 && len(rest) >= 2 {
					id, rest = int(binary.BigEndian.Uint16(rest)), rest[2:]
				}
				seq, result := -1, ""
				if m := traceSeq.FindSubmatch(rest); m != nil {
					seq, _ = strconv.Atoi(string(m[1]))
				}
				if m := traceResult.FindSubmatch(rest); m != nil && dir == "A>B" {
					result = string(m[1])
				}
				p.record(proxyEvent{conn: n, kind: pktPublish, toAgent: dir == "B>A", publish: true, lost: lost, id: uint16(id), seq: seq, result: result})
				p.trace(n, dir, "PUBLISH", id, pkt[0]&8 != 0, lost, strconv.Itoa(seq)+" "+result)
			}
		case pktPuback, pktPubrec, pktPubrel, pktPubcomp:
			if pkt[0]>>4 == pktPuback && dir == "A>B" && p.lose() {
				continue
			}
			if len(body) >= 2 {
				id := int(binary.BigEndian.Uint16(body))
				p.record(proxyEvent{conn: n, kind: pkt[0] >> 4, toAgent: dir == "B>A", lost: lost, id: uint16(id), seq: -1})
				p.trace(n, dir, [...]string{"PUBACK", "PUBREC", "PUBREL", "PUBCOMP"}[pkt[0]>>4-pktPuback], id, false, lost, "")
			}
		case 2: // CONNACK
			if len(body) >= 2 {
				p.trace(n, dir, fmt.Sprintf("CONNACK sp=%d rc=%d", body[0], body[1]), 0, false, false, "")
			}
		}
		if lost {
			continue
		}
		if _, err := to.Write(pkt); err != nil {
			if dir != "B>A" {
				_ = from.Close() // the broker is gone: so is the agent's link
				return
			}
			// The agent is gone: read what the broker still sends until
			// it closes (the other side ends its input).
			lost = true
			_ = from.SetReadDeadline(time.Now().Add(10 * time.Second))
		}
	}
}

// loseAcks makes the proxy swallow the client's next n PUBACKs.
func (p *mqttProxy) loseAcks(n int64) { p.toLose.Add(n) }

// lose reports whether to swallow a PUBACK now, counting it.
func (p *mqttProxy) lose() bool {
	for {
		n := p.toLose.Load()
		if n <= 0 {
			return false
		}
		if p.toLose.CompareAndSwap(n, n-1) {
			p.held.Add(1)
			return true
		}
	}
}

func (p *mqttProxy) record(e proxyEvent) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
	p.last.Store(time.Now().UnixNano())
}

// quiet is how long the proxy has relayed no PUBLISH and no PUBACK (or
// PUBREC, PUBREL, PUBCOMP), either way.
func (p *mqttProxy) quiet() time.Duration {
	return time.Since(time.Unix(0, p.last.Load()))
}

// Events returns what the proxy saw so far, in order.
func (p *mqttProxy) Events() []proxyEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// readPacket reads one MQTT control packet: fixed header, remaining length,
// body.
func readPacket(r *bufio.Reader) ([]byte, error) {
	h, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	pkt := []byte{h}
	n, mul := 0, 1
	for range 4 {
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		pkt = append(pkt, b)
		n += int(b&127) * mul
		mul *= 128
		if b&128 == 0 {
			break
		}
	}
	pkt = append(pkt, make([]byte, n)...)
	if _, err := io.ReadFull(r, pkt[len(pkt)-n:]); err != nil {
		return nil, err
	}
	return pkt, nil
}

// packetBodyLen is the remaining length of a packet readPacket returned.
func packetBodyLen(pkt []byte) int {
	n, mul := 0, 1
	for _, b := range pkt[1:min(len(pkt), 5)] {
		n += int(b&127) * mul
		mul *= 128
		if b&128 == 0 {
			break
		}
	}
	return n
}

func (p *mqttProxy) trace(n int, dir, what string, id int, dup, lost bool, seq string) {
	if p.out == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d := 0
	if dup {
		d = 1
	}
	if lost {
		dir = "B>X" // never reached the agent
	}
	fmt.Fprintf(p.out, "%s c%d %s %s id=%d dup=%d seq=%s\n", time.Now().Format("15:04:05.000000"), n, dir, what, id, d, seq)
}

func (p *mqttProxy) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out != nil {
		p.out.Flush()
	}
}

// keepOnFailure copies dirs into $EDDY_AEDES_TRACE/<test>-<time> when the
// test fails, after flushing p's trace: the agent's ingest log and the
// broker's packet trace, to find where a reading went.
func keepOnFailure(t *testing.T, p *mqttProxy, dirs ...string) {
	keep := os.Getenv("EDDY_AEDES_TRACE")
	if keep == "" {
		return
	}
	t.Cleanup(func() {
		p.flush()
		if !t.Failed() {
			return
		}
		dst := filepath.Join(keep, fmt.Sprintf("%s-%d", t.Name(), time.Now().Unix()))
		for i, d := range dirs {
			if err := os.CopyFS(filepath.Join(dst, fmt.Sprint(i)), os.DirFS(d)); err != nil {
				t.Logf("keep %s: %v", d, err)
			}
		}
		t.Logf("kept in %s", dst)
	})
}

// brokerFaults is what the packet trace proves aedes did to readings:
// each reading's allowed count in the results, [lo, hi], where the broker
// lost or duplicated it, and the evidence.
type brokerFaults struct {
	lo, hi map[int]int // absent: exactly once
	// collisions counts the agent's PUBACKs that aedes took for another
	// message of the session with the same packet id: that message was
	// still unacknowledged (sent on an earlier connection, or its id given
	// on one), and aedes removes the first message with the id from the
	// session, not the one acknowledged.
	collisions int
	// removed are the readings such an ack removed: aedes never sends them
	// again. undelivered of them never reached the agent at all.
	removed, undelivered int
	// kept are the readings allowed a second copy: those whose ack removed
	// another (aedes keeps them and sends them again on a later
	// connection, acknowledged), and those counted in again.
	kept int
	// again counts readings aedes sent again on the same connection after
	// the agent's PUBACK for them had reached it there: a new publication
	// by MQTT's rules (§4.3.2), aedes' duplicate.
	again int
	// unseen counts readings aedes sent again on a later connection, with
	// the packet id of their PUBACK, after it had read that PUBACK: the
	// trace shows no other message holding the id, so the ack removed one
	// whose id aedes gave but never wrote (on a connection it went on
	// numbering messages for after their bytes could no longer leave, see
	// unwritten), and aedes kept the one acknowledged. Allowed once more.
	unseen int
}

// aedesFaults replays the trace against aedes' session store as aedes 1.2.0
// keeps it (aedes-persistence: a PUBACK removes the first stored message
// with that packet id; a re-send keeps the id it was first sent with; a new
// connection numbers new messages from a random id on). Per packet id, the
// store holds the readings sent with it and not yet removed, oldest first
// (the store is in publishing order, and seq follows it). The agent's
// PUBACK on a connection is meant for the oldest reading it received there
// with that id and has not acked; aedes removes the oldest the store holds.
// When they differ, the meant reading stays (a duplicate later, allowed
// once more) and the removed one is lost to the agent unless it had logged
// it (allowed 0 or 1 times; 0 if it never reached the agent). A reading
// never sent to the agent at all is the broker's loss too (allowed 0).
func aedesFaults(events []proxyEvent, readings int) brokerFaults {
	events = unwritten(events)
	f := brokerFaults{lo: map[int]int{}, hi: map[int]int{}}
	owners := map[uint16][]int{}  // packet id → readings the store holds with it
	owned := map[int]uint16{}     // reading → its id in the store
	pending := map[[2]int][]int{} // (connection, id) → readings the agent got there, unacked
	delivered := map[int]bool{}   // reached the agent at least once
	ackedOn := map[int]int{}      // reading → connection its ack was relayed on
	removedBy := map[int]bool{}   // removed from the store by another reading's ack
	lastSent := map[int]int{}     // reading → index of its last PUBLISH
	firstSent := map[[2]int]int{} // (reading, id) → index of its first PUBLISH with the id
	tookAck := map[int]proxyAck{} // reading → its ack, which removed no other reading the trace shows
	var acks []proxyAck           // every PUBACK matched to the reading it was meant for
	type resent struct {
		seq int
		ack proxyAck
	}
	var again []resent // sent again on a later connection, same id, after such an ack
	drop := func(id uint16, seq int) {
		o := owners[id]
		if i := slices.Index(o, seq); i >= 0 {
			owners[id] = slices.Delete(o, i, i+1)
		}
		delete(owned, seq)
	}
	for i, e := range events {
		switch {
		case e.publish && e.toAgent && e.seq >= 0:
			lastSent[e.seq] = i
			if _, ok := firstSent[[2]int{e.seq, int(e.id)}]; !ok {
				firstSent[[2]int{e.seq, int(e.id)}] = i
			}
			if id, ok := owned[e.seq]; ok {
				drop(id, e.seq)
			}
			owned[e.seq] = e.id
			o := append(owners[e.id], e.seq)
			slices.Sort(o)
			owners[e.id] = o
			if !e.lost {
				if ackedOn[e.seq] == e.conn {
					f.hi[e.seq]++
					f.again++
				} else if a, ok := tookAck[e.seq]; ok && a.id == e.id {
					again = append(again, resent{e.seq, a})
				}
				delete(tookAck, e.seq)
				delivered[e.seq] = true
				k := [2]int{e.conn, int(e.id)}
				pending[k] = append(pending[k], e.seq)
			}
		case e.kind == pktPuback && !e.toAgent:
			k := [2]int{e.conn, int(e.id)}
			if len(pending[k]) == 0 {
				continue
			}
			meant := pending[k][0]
			pending[k] = pending[k][1:]
			acks = append(acks, proxyAck{conn: e.conn, at: i, id: e.id, seq: meant})
			o := owners[e.id]
			if len(o) == 0 {
				continue
			}
			victim := o[0]
			drop(e.id, victim)
			ackedOn[meant] = e.conn
			if victim != meant {
				f.collisions++
				removedBy[victim] = true
				f.hi[meant]++ // aedes keeps it: one more copy later
			} else {
				tookAck[meant] = acks[len(acks)-1]
			}
		}
	}
	// A reading aedes sent again on a later connection with the id of an
	// ack it had read: it kept the reading, so that ack removed another
	// message with the id, one the trace never shows with it.
	read := readUpTo(events, acks, lastSent, firstSent)
	for _, r := range again {
		if r.ack.at <= read[r.ack.conn] {
			f.hi[r.seq]++
			f.unseen++
		}
	}
	for s := range readings {
		switch {
		case !delivered[s]:
			f.lo[s], f.hi[s] = 0, 0
			f.undelivered++
			if removedBy[s] {
				f.removed++
			}
		case removedBy[s]:
			// Delivered, but its ack never reached aedes before another
			// reading's ack removed it: counted once if the agent had
			// logged it, else not at all.
			f.lo[s], f.hi[s] = 0, 1+f.hi[s]
			f.removed++
		}
	}
	for s, h := range f.hi {
		if _, ok := f.lo[s]; !ok {
			f.lo[s], f.hi[s] = 1, 1+h
			f.kept++
		}
	}
	return f
}

// proxyAck is a PUBACK the agent sent (at: its index in the events) and
// the reading it was meant for.
type proxyAck struct {
	conn, at int
	id       uint16
	seq      int
}

// readUpTo maps each connection to the index of its last event that aedes
// provably read (-1 if none), acks processing in order:
//   - a connection whose agent side ended first and whose broker side then
//     ended with EOF was read to its end: the proxy ends aedes' input after
//     everything the agent sent, aedes closes the connection when its input
//     ends, which comes only after every byte before it was read, and a
//     socket closed with bytes unread resets instead (a connection aedes
//     closed first, on a client error, may have left acks unread);
//   - a PUBACK was read if the reading it was meant for is never sent
//     again (once aedes is done sending: the tests wait for that), and so
//     is none of the readings of the k other PUBACKs with its id that
//     followed that reading's last sending, each first sent with the id
//     after it: those k+1 readings held the id in the session after that
//     point (aedes writes no message it no longer holds), all are gone,
//     and only those k+1 acks could remove them, one each; so each was
//     read, this one too. aedes reads a connection in order, so every
//     PUBACK before it there was read too.
func readUpTo(events []proxyEvent, acks []proxyAck, lastSent map[int]int, firstSent map[[2]int]int) map[int]int {
	read := map[int]int{}
	ended := map[int]bool{} // the agent's side ended, the broker's not yet
	decided := map[int]bool{}
	for i, e := range events {
		if _, ok := read[e.conn]; !ok {
			read[e.conn] = -1
		}
		if e.kind != pktEnd || decided[e.conn] {
			continue
		}
		switch {
		case !e.toAgent:
			ended[e.conn] = true
		case ended[e.conn] && e.eof:
			read[e.conn] = i
			decided[e.conn] = true
		default:
			decided[e.conn] = true
		}
	}
	byIndex := map[int]proxyAck{}
	for _, a := range acks {
		byIndex[a.at] = a
	}
	ackedAt := map[uint16][]int{} // id → indexes of all its PUBACKs, matched or not
	for i, e := range events {
		if e.kind == pktPuback && !e.toAgent {
			ackedAt[e.id] = append(ackedAt[e.id], i)
		}
	}
	for _, a := range acks {
		if lastSent[a.seq] > a.at || a.at <= read[a.conn] {
			continue
		}
		// Every reading acked with this id since a's was last sent is
		// gone too, and was sent after it (it held the id only then):
		// these readings needed as many removals as there are acks.
		proven := true
		for _, j := range ackedAt[a.id] {
			if j == a.at || j <= lastSent[a.seq] {
				continue
			}
			o, ok := byIndex[j]
			if !ok || lastSent[o.seq] > j || firstSent[[2]int{o.seq, int(a.id)}] <= lastSent[a.seq] {
				proven = false
				break
			}
		}
		if proven {
			read[a.conn] = a.at
		}
	}
	return read
}

// unwritten adds to events the ids aedes gave readings on a dead connection
// without writing them anywhere the proxy could read (after it destroyed
// the socket): a connection numbers its messages in sequence, and live
// readings go out in publishing order, so after the last message it wrote
// there (seq s, id x) reading s+j took id x+j, while it is never seen on
// any connection or is first seen with that id (sent again, keeping it).
// Each is added as a lost PUBLISH after that connection's last event.
func unwritten(events []proxyEvent) []proxyEvent {
	first := map[int]proxyEvent{} // reading → its first appearance
	lastLost := map[int]proxyEvent{}
	lastAt := map[int]int{} // connection → index of its last event
	for i, e := range events {
		lastAt[e.conn] = i
		if !e.publish || !e.toAgent || e.seq < 0 {
			continue
		}
		if _, ok := first[e.seq]; !ok {
			first[e.seq] = e
		}
		if e.lost {
			lastLost[e.conn] = e
		}
	}
	add := map[int][]proxyEvent{} // index → events to add after it
	for c, e := range lastLost {
		for j := 1; j < 65535; j++ {
			id := uint16((int(e.id)+j-1)%65535 + 1)
			s := e.seq + j
			if fe, seen := first[s]; seen {
				if fe.id != id {
					break
				}
				continue
			}
			add[lastAt[c]] = append(add[lastAt[c]], proxyEvent{conn: c, toAgent: true, publish: true, lost: true, id: id, seq: s})
		}
	}
	if len(add) == 0 {
		return events
	}
	out := make([]proxyEvent, 0, len(events))
	for i, e := range events {
		out = append(out, e)
		out = append(out, add[i]...)
	}
	return out
}

// exact reports whether the broker neither lost nor duplicated a reading.
//
// A reading aedes sends again on the connection its ack reached is allowed
// once more as well: seen 9 times in a run (the first copy acknowledged
// 22 ms after it came, the second 600 ms later, same packet id).
func (f brokerFaults) exact() bool { return len(f.lo) == 0 }
