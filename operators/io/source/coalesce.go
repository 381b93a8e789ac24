package source

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/proxy"
)

const (
	// coalesceMax is how many bytes coalescingConn buffers before Write
	// waits for the flusher: a peer that stops reading stalls the writer
	// here, as a full socket buffer would.
	coalesceMax = 256 << 10
	// closeFlushTimeout bounds how long Close spends sending what is
	// buffered (the DISCONNECT, the last acks) to a peer that does not read.
	closeFlushTimeout = time.Second
	// readBufferSize is coalescingConn's read buffer: paho reads a packet
	// in three reads (type byte, length, body), one read(2) each without a
	// buffer; with it one read(2) takes in whatever the broker sent. It
	// holds what the broker sends at ~30,000 readings/s in a readInterval,
	// so the pauses hold up to well above the rates a gateway sees.
	readBufferSize = 64 << 10
	// readInterval is the least time between two read(2) calls of a busy
	// connection (see readPause): at 10,000 messages/s mosquitto writes
	// every millisecond or so, and each read(2) of a few messages woke the
	// reader, the source's deliverer and the ingest intake (~750 reads and
	// ~2,000 goroutine wake-ups a second, a third of the agent's CPU).
	// Twenty milliseconds take in ~200 messages a read at that rate (5 ms
	// took ~50 and cost 1.5 points more of a core at 1 s checkpoints on an
	// idle machine) and add at most that much to a message's wait for its
	// commit, which lingers 100 ms by default.
	readInterval = 20 * time.Millisecond
)

// readPause is how long the reader waits before its next read(2), given
// when the previous one returned (UnixNano) and how many bytes it got: until
// readInterval after it, so the broker's writes gather in the socket and
// one read(2) takes them together, unless that read filled at least half
// the buffer (the connection delivers faster than pauses could keep up
// with) or got nothing (the first read). A quiet connection, whose last
// read was readInterval ago, never waits.
func readPause(prev int64, got int, now int64) time.Duration {
	if got == 0 || got >= readBufferSize/2 {
		return 0
	}
	return max(time.Duration(prev+int64(readInterval)-now), 0)
}

// coalescingConn turns many small writes into few write(2) calls. paho
// writes every packet with its own write, and a PUBACK is 4 bytes: at 10,000
// QoS 1 messages/s that is 10,000 syscalls a second, each waking the broker.
// Write copies into a buffer and returns; one flusher goroutine writes
// everything buffered in one call, so the acks of a committed batch leave
// together, in order. A write error is returned by the following Writes (a
// lost ack only makes the broker redeliver, which the ingest log's dedup
// recognizes). Every Write and writeAcks appends whole packets under the
// lock, so packets of concurrent writers never interleave. Reads go through
// a buffer (one reader: paho's); deadlines and addresses are the
// connection's own.
type coalescingConn struct {
	net.Conn
	r *bufio.Reader
	// recv, when set, takes the PUBLISH packets read: Read parses them
	// itself and passes only the other packets on (see Read).
	recv publishReader
	in   inboundState
	// live is the keepalive rule (liveness): the read buffer reads through
	// it, Write sees paho's PINGREQs, readPacket the PINGRESPs.
	live liveness

	mu      sync.Mutex
	cond    sync.Cond // signalled when the buffer was taken or an error occurred
	buf     []byte    // bytes not yet handed to the flusher
	spare   []byte
	err     error
	closing bool
	kick    chan struct{} // capacity 1: the flusher has work
	flushed chan struct{} // closed when the flusher exits
	once    sync.Once
	cerr    error
}

// publishReader is what receives the PUBLISH packets a coalescingConn
// reads. Its methods run on the connection's reader goroutine (paho's) and
// must not block.
type publishReader struct {
	// queue takes one message (Topic, Payload, Arrival, Dup and the ack
	// fields set), received at QoS qos, without waking its consumer. By
	// value: a pointer through a func value would move every message to
	// the heap.
	queue func(m Message, qos byte)
	// wake wakes the consumer: queued messages wait. Called once the
	// messages already read are queued, before the reader may block.
	wake func()
	// maxSize bounds a payload: a PUBLISH declaring a larger body is read
	// only up to its topic, packet id and TooLargeKeep payload bytes (at
	// most maxPublishHead), the rest skipped unread into memory, and queued
	// with TooLarge set.
	maxSize int
}

// limit is maxSize, DefaultMaxMessageSize when unset.
func (r *publishReader) limit() int {
	if r.maxSize <= 0 {
		return DefaultMaxMessageSize
	}
	return r.maxSize
}

// maxPublishHead is the most of an oversized PUBLISH read into memory: the
// longest topic with its length, the packet id, and TooLargeKeep payload
// bytes.
const maxPublishHead = 2 + 65535 + 2 + TooLargeKeep

// maxControlPacket bounds a packet other than PUBLISH from the broker
// (CONNACK, SUBACK, PUBREL...: a few bytes each); a larger declared length
// is malformed, refused before allocating it.
const maxControlPacket = 64 << 10

// inboundState is the reader goroutine's own part of a coalescingConn with
// a publishReader.
type inboundState struct {
	pass     []byte // bytes of a non-PUBLISH packet not yet returned by Read
	passBuf  []byte
	big      []byte // a PUBLISH larger than the read buffer
	queued   bool   // messages were queued since the last wake
	arrival  int64  // UnixMilli of the last read(2) that started a packet
	lastRead int64  // UnixNano when that read(2) returned, for readPause
	lastGot  int    // bytes that read(2) returned, for readPause
	topics   map[string]string
	arena    arena
	conn     ConnID // the connection's identity, set before the first read
	resumed  bool   // the broker's CONNACK said session present
	// v5: the connection speaks MQTT 5 (v5.go): a PUBLISH has properties,
	// and its topic may be an alias; aliases are the connection's,
	// indexed by alias, set by the broker up to v5TopicAliasMax.
	v5      bool
	aliases []string
}

// newCoalescingConn wraps c; pingTimeout is its liveness timeout (0: no
// watchdog).
func newCoalescingConn(c net.Conn, pingTimeout time.Duration) *coalescingConn {
	cc := &coalescingConn{Conn: c, kick: make(chan struct{}, 1), flushed: make(chan struct{})}
	cc.live.timeout, cc.live.kill = pingTimeout, func() { _ = c.Close() }
	cc.r = bufio.NewReaderSize(clockedReader{c: c, l: &cc.live}, readBufferSize)
	cc.cond.L = &cc.mu
	go cc.flushLoop()
	return cc
}

// Read reads from the read buffer, which one read(2) refills with whatever
// the connection has. With a publishReader, Read hands every PUBLISH packet
// to it and returns only the other packets (CONNACK, SUBACK, PUBREL,
// PINGRESP...) to paho: a message then takes no goroutine hand-off between
// the socket and the source's queue, where paho's reader passes it through
// four goroutines, and the consumer is woken once per read(2) rather than
// once per message.
func (c *coalescingConn) Read(p []byte) (int, error) {
	if c.recv.queue == nil {
		return c.r.Read(p)
	}
	for len(c.in.pass) == 0 {
		if err := c.readPacket(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.in.pass)
	c.in.pass = c.in.pass[n:]
	return n, nil
}

// errMalformed ends a connection whose broker sent a packet that does not
// parse, as paho would.
var errMalformed = errors.New("source: mqtt: malformed packet from the broker")

// maxKeptBuffer is the largest buffer for big PUBLISH packets that a
// connection keeps for the next one.
const maxKeptBuffer = 1 << 20

// maxInternedTopics bounds a connection's topic strings; past it the set
// starts over.
const maxInternedTopics = 16384

// mayBlock wakes the publishReader's consumer if messages were queued and
// fewer than n bytes are buffered: the next read may wait for the broker.
func (c *coalescingConn) mayBlock(n int) {
	if c.in.queued && c.r.Buffered() < n {
		c.in.queued = false
		c.recv.wake()
	}
}

// readPacket reads one packet: a PUBLISH goes to the publishReader, any
// other into in.pass for Read.
func (c *coalescingConn) readPacket() error {
	c.mayBlock(1)
	fresh := c.r.Buffered() == 0
	if fresh {
		if d := readPause(c.in.lastRead, c.in.lastGot, time.Now().UnixNano()); d > 0 {
			time.Sleep(d)
		}
	}
	hdr, err := c.r.ReadByte()
	if err != nil {
		return err
	}
	if fresh {
		// One clock read per read(2): what it read arrived together.
		now := time.Now()
		c.in.arrival, c.in.lastRead, c.in.lastGot = now.UnixMilli(), now.UnixNano(), c.r.Buffered()+1
	}
	var lenBytes [4]byte
	size, nl := 0, 0
	for {
		c.mayBlock(1)
		b, err := c.r.ReadByte()
		if err != nil {
			return err
		}
		if nl == len(lenBytes) {
			return errMalformed
		}
		lenBytes[nl] = b
		size |= int(b&0x7f) << (7 * nl)
		nl++
		if b&0x80 == 0 {
			break
		}
	}
	c.mayBlock(size)
	if hdr>>4 != 3 { // not PUBLISH: for paho
		if size > maxControlPacket {
			return errMalformed
		}
		if hdr == 0xd0 { // PINGRESP
			c.live.ponged()
		}
		b := append(append(c.in.passBuf[:0], hdr), lenBytes[:nl]...)
		b = slices.Grow(b, size)[:len(b)+size]
		if _, err := io.ReadFull(c.r, b[1+nl:]); err != nil {
			return err
		}
		if hdr == 0x20 && size >= 1 { // CONNACK: bit 0 of its first byte is session present
			c.in.resumed = b[1+nl]&1 != 0
		}
		c.in.passBuf, c.in.pass = b, b
		return nil
	}
	if size > c.recv.limit()+2+65535+2 { // beyond any PUBLISH within the limit
		return c.publishTooLarge(hdr, size)
	}
	var body []byte
	if size <= c.r.Size() {
		if body, err = c.r.Peek(size); err != nil {
			return err
		}
	} else {
		c.in.big = slices.Grow(c.in.big[:0], size)[:size]
		if _, err := io.ReadFull(c.r, c.in.big); err != nil {
			return err
		}
		body = c.in.big
	}
	if err := c.publish(hdr, body, false); err != nil {
		return err
	}
	if size <= c.r.Size() {
		_, _ = c.r.Discard(size) // Peeked: buffered
	} else if cap(c.in.big) > maxKeptBuffer {
		c.in.big = nil // one huge message should not stay for the connection's life
	}
	return nil
}

// publishTooLarge reads the head of a PUBLISH whose declared body of size
// bytes exceeds any payload within maxSize, skips the rest (bufio's
// Discard reads it through the buffer, allocating nothing), and queues the
// message cut to TooLargeKeep bytes.
func (c *coalescingConn) publishTooLarge(hdr byte, size int) error {
	head := min(size, maxPublishHead)
	c.in.big = slices.Grow(c.in.big[:0], head)[:head]
	if _, err := io.ReadFull(c.r, c.in.big); err != nil {
		return err
	}
	if _, err := c.r.Discard(size - head); err != nil {
		return err
	}
	return c.publish(hdr, c.in.big, true)
}

// publish parses a PUBLISH packet's body (MQTT 3.1.1 and 3.1 alike) and
// queues its message, copying topic and payload out of the read buffer. A
// payload beyond maxSize (or a body cut by publishTooLarge, cut) is queued
// TooLarge with its first TooLargeKeep bytes.
func (c *coalescingConn) publish(hdr byte, body []byte, cut bool) error {
	qos := (hdr >> 1) & 3
	if qos == 3 || len(body) < 2 {
		return errMalformed
	}
	end := 2 + (int(body[0])<<8 | int(body[1]))
	if len(body) < end {
		return errMalformed
	}
	topic := body[2:end]
	m := Message{Arrival: c.in.arrival, Dup: hdr&0x08 != 0, Conn: c.in.conn, Resumed: c.in.resumed}
	if qos > 0 {
		if len(body) < end+2 {
			return errMalformed
		}
		m.conn, m.ackID, m.ackPubrec = c, uint16(body[end])<<8|uint16(body[end+1]), qos == 2
		end += 2
	}
	var props []byte
	alias := 0
	if c.in.v5 {
		n, k := binary.Uvarint(body[end:])
		if k <= 0 || n > uint64(len(body)-end-k) {
			return errMalformed
		}
		props = body[end+k : end+k+int(n)]
		end += k + int(n)
		var keep bool
		if alias, keep = scanPublishProps(props); alias < 0 {
			return errMalformed
		}
		if !keep {
			props = nil
		}
	}
	if alias > 0 && len(topic) == 0 { // the alias stands for the topic
		if alias >= len(c.in.aliases) || c.in.aliases[alias] == "" {
			return errMalformed // an alias the broker never set: a protocol error
		}
		m.Topic = c.in.aliases[alias]
	} else {
		m.Topic = c.intern(topic)
	}
	if alias > 0 {
		if alias > v5TopicAliasMax {
			return errMalformed
		}
		if c.in.aliases == nil {
			c.in.aliases = make([]string, v5TopicAliasMax+1)
		}
		c.in.aliases[alias] = m.Topic
	}
	if len(props) > MaxProps {
		props, cut = nil, true // dead-lettered too_large, like a payload over the limit
	}
	if props != nil {
		m.Props = c.in.arena.copyProps(props)
	}
	payload := body[end:]
	if cut || len(payload) > c.recv.limit() {
		payload, m.TooLarge = payload[:min(len(payload), TooLargeKeep)], true
	}
	m.Payload = c.in.arena.copy(payload)
	c.recv.queue(m, qos)
	c.in.queued = true
	return nil
}

// intern returns topic as a string, the same one for every message of the
// topic on the connection: no allocation once the topic was seen.
func (c *coalescingConn) intern(topic []byte) string {
	t, ok := c.in.topics[string(topic)] // no allocation for the lookup
	if !ok {
		if c.in.topics == nil || len(c.in.topics) >= maxInternedTopics {
			c.in.topics = make(map[string]string)
		}
		t = string(topic)
		c.in.topics[t] = t
	}
	return t
}

// Write buffers p for the flusher; it waits only while coalesceMax bytes are
// buffered already.
func (c *coalescingConn) Write(p []byte) (int, error) {
	if err := c.lockRoom(len(p)); err != nil {
		return 0, err
	}
	c.buf = append(c.buf, p...)
	c.mu.Unlock()
	c.kickFlusher()
	if isPingreq(p) {
		c.live.pinged()
	}
	return len(p), nil
}

// lockRoom locks c.mu once n more bytes fit (or the buffer is empty); it
// returns with c.mu unlocked and an error if the connection failed or is
// closing.
func (c *coalescingConn) lockRoom(n int) error {
	c.mu.Lock()
	for c.err == nil && !c.closing && len(c.buf) > 0 && len(c.buf)+n > coalesceMax {
		c.cond.Wait()
	}
	if c.err != nil || c.closing {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return err
	}
	return nil
}

func (c *coalescingConn) kickFlusher() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// ackPacketSize is the size of a PUBACK or PUBREC packet.
const ackPacketSize = 4

// writeAcks acknowledges the messages at the start of msgs that arrived on
// c, in order, and returns how many it took: a PUBACK for QoS 1, a PUBREC
// for QoS 2 (paho answers the broker's PUBREL with the PUBCOMP), all in
// one append to the buffer and one wake-up of the flusher. This replaces
// paho's ack path (three goroutine hand-offs and a few allocations per
// ack). Acks for a connection that failed or is closing are dropped: the
// broker redelivers those messages on the next connection.
func (c *coalescingConn) writeAcks(msgs []Message) int {
	n := 0
	for n < len(msgs) && msgs[n].conn == c {
		n++
	}
	// Taken in chunks so a huge batch still fits the buffer's cap.
	for done := 0; done < n; {
		k := min(n-done, coalesceMax/ackPacketSize)
		if c.lockRoom(k*ackPacketSize) != nil {
			break
		}
		for i := done; i < done+k; i++ {
			c.appendAckLocked(&msgs[i])
		}
		c.mu.Unlock()
		c.kickFlusher()
		done += k
	}
	for i := range n {
		msgs[i].conn = nil
	}
	return n
}

// writeAck acknowledges m, which arrived on c (see writeAcks).
func (c *coalescingConn) writeAck(m *Message) {
	m.conn = nil
	if c.lockRoom(ackPacketSize) != nil {
		return
	}
	c.appendAckLocked(m)
	c.mu.Unlock()
	c.kickFlusher()
}

func (c *coalescingConn) appendAckLocked(m *Message) {
	kind := byte(0x40) // PUBACK
	if m.ackPubrec {
		kind = 0x50 // PUBREC
	}
	c.buf = append(c.buf, kind, 2, byte(m.ackID>>8), byte(m.ackID))
}

func (c *coalescingConn) flushLoop() {
	defer close(c.flushed)
	for range c.kick {
		for {
			c.mu.Lock()
			if len(c.buf) == 0 {
				closing := c.closing
				c.mu.Unlock()
				if closing {
					return
				}
				break
			}
			b := c.buf
			c.buf, c.spare = c.spare[:0], nil
			c.cond.Broadcast()
			c.mu.Unlock()
			_, err := c.Conn.Write(b)
			c.mu.Lock()
			c.spare = b[:0]
			if err != nil {
				c.err = err
				c.cond.Broadcast()
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
		}
	}
}

// Close sends what is buffered, for up to closeFlushTimeout, then closes
// the connection gracefully: it shuts down the sending side and reads until
// the broker closes its side (or closeFlushTimeout passes). Closing a socket
// with unread bytes makes the kernel send RST instead of FIN, and a broker
// that receives RST discards what it had not read yet: the last acks and the
// DISCONNECT. mosquitto reads one packet per wakeup, so up to a whole
// committed batch of acks was lost that way and redelivered after the
// reconnect. Later calls return the first call's result.
func (c *coalescingConn) Close() error {
	c.once.Do(func() {
		c.live.stop()
		c.mu.Lock()
		c.closing = true
		c.cond.Broadcast()
		c.mu.Unlock()
		deadline := time.Now().Add(closeFlushTimeout)
		_ = c.Conn.SetWriteDeadline(deadline)
		select {
		case c.kick <- struct{}{}:
		default:
		}
		<-c.flushed
		if tc, ok := c.Conn.(*net.TCPConn); ok && tc.CloseWrite() == nil {
			_ = tc.SetReadDeadline(deadline)
			var sink [512]byte
			for {
				if _, err := tc.Read(sink[:]); err != nil {
					break
				}
			}
		}
		c.cerr = c.Conn.Close()
	})
	return c.cerr
}

// coalescingDial dials a plain TCP broker as paho would (its Dialer, the
// proxy from the environment) and wraps the connection in a coalescingConn
// with pingTimeout; the MQTT source's paho OpenConnectionFunc.
func coalescingDial(uri *url.URL, o paho.ClientOptions, pingTimeout time.Duration) (*coalescingConn, error) {
	d := o.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 30 * time.Second}
	}
	conn, err := proxy.FromEnvironmentUsing(d).Dial("tcp", uri.Host)
	if err != nil {
		return nil, err
	}
	return newCoalescingConn(conn, pingTimeout), nil
}
