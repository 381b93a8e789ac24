package mqtt5

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"
)

// ErrNoConnack is Open's answer, wrapping the read error, when the broker
// closed the connection after the CONNECT without a CONNACK (RabbitMQ's
// MQTT plugin does so for a version it does not speak; a broker going down
// might too): the client may try MQTT 3.1.1.
var ErrNoConnack = errors.New("the broker closed the connection after the MQTT 5 CONNECT, without a CONNACK")

// ErrClosed is the reason of a session its owner ended (Disconnect, Close).
var ErrClosed = errors.New("mqtt5: session closed")

// RefusedError is Open's answer from a broker whose CONNACK refuses the
// client (a reason code other than success, or a 3.1.1 refusal other than
// the protocol version).
type RefusedError struct{ Connack Connack }

func (e *RefusedError) Error() string {
	if e.Connack.V4 {
		return fmt.Sprintf("the broker refused the connection: return code %d", e.Connack.Code)
	}
	msg := fmt.Sprintf("the broker refused the connection: %s (%#02x)", ReasonName(e.Connack.Code), e.Connack.Code)
	if e.Connack.Reason != "" {
		msg += " (the broker says: " + e.Connack.Reason + ")"
	}
	return msg
}

// DisconnectError is a DISCONNECT from the broker: the reason a session
// ends when the broker ends it.
type DisconnectError struct {
	Code   byte
	Reason string // the broker's reason string; empty if it sent none
}

func (e *DisconnectError) Error() string {
	msg := fmt.Sprintf("the broker disconnected: %s (%#02x)", ReasonName(e.Code), e.Code)
	if e.Code == 0x8E {
		msg += ": another client connected with this client id"
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Dialable reports whether broker's URL scheme is one Dial reaches: tcp://,
// mqtt://, ssl://, tls:// and mqtts:// (not ws:// or wss://).
func Dialable(broker string) bool {
	u, err := url.Parse(broker)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
		return true
	}
	return false
}

// PacketReader reads the broker's packets, one per call, decoded.
type PacketReader interface {
	ReadPacket() (*mp.Packet, error)
}

// bufReader is the PacketReader of a connection read through a buffer.
type bufReader struct {
	r   *bufio.Reader
	max int
}

func (b bufReader) ReadPacket() (*mp.Packet, error) { return ReadPacket(b.r, b.max) }

// Config is how Open runs a session.
type Config struct {
	Connect Connect
	// Reader reads the packets from the connection; nil: a buffered
	// reader of it, packets of at most MaxRead bytes.
	Reader PacketReader
	// MaxRead bounds a packet the default Reader reads; 0:
	// MaxControlPacket.
	MaxRead int
	// Deadline is when the CONNACK must have come: Open fails after it.
	// Zero: no limit but ctx.
	Deadline time.Time
	// WriteTimeout bounds each Write; 0: writes have no deadline.
	WriteTimeout time.Duration
	// Ping has Run send a PINGREQ every keepalive interval (KeepAlive).
	// Without it the owner sends its own.
	Ping bool
	// ReadDeadline has Run end the session when nothing at all arrives
	// for 1.5 × KeepAlive (with Ping, at least one PINGRESP is due in
	// that time). Without it the owner judges the connection's liveness.
	ReadDeadline bool
}

// Session is one MQTT 5 connection of a client: the CONNECT and CONNACK
// (Open), the packets the broker sends (Run), the packets the client
// writes (Write), the keepalive, and the end (Disconnect, Close).
//
// Concurrency: Write, Disconnect, Close, Done, Err and KeepAlive may be
// called from any goroutine, also while Run runs. Next and Run read the
// connection and belong to one goroutine: Next before Run, Run once.
//
// Writes are serialized: the bytes of one Write reach the connection
// together and in the order of the calls, never interleaved with another
// Write. A packet written in several Writes (through a bufio.Writer, say)
// may have another goroutine's Write between its parts: a client writes
// such packets from one goroutine and turns Ping off. A Write that returned nil has handed its bytes to the connection,
// not to the broker: a packet written before the session ends may be lost
// with the connection (MQTT's QoS 1 and 2 flows are for that); one whose
// Write starts after the end fails with the session's Err.
//
// The session ends once, at the first of: a read error, a DISCONNECT from
// the broker (Err is a *DisconnectError), an error of Run's handler, a
// failed PINGREQ, or the owner's Disconnect or Close (ErrClosed). At its
// end Done is closed, Err set for good, and the connection closed; a
// packet being read is dropped, a Write in progress returns its error.
type Session struct {
	conn      net.Conn
	r         PacketReader
	cfg       Config
	keepAlive time.Duration

	wmu sync.Mutex // serializes writes
	buf bytes.Buffer

	done chan struct{}
	once sync.Once
	err  error // why done closed; set before
}

// Open sends the CONNECT of cfg on conn and reads the CONNACK, with the
// deadline cfg.Deadline, cut short when ctx ends. It returns the session
// and the CONNACK. A broker that refuses MQTT 5 is ErrVersionRefused; one
// that closes the connection unanswered is ErrNoConnack (wrapping the read
// error); one that refuses the client is a *RefusedError. On error conn is
// closed.
func Open(ctx context.Context, conn net.Conn, cfg Config) (*Session, Connack, error) {
	s := &Session{conn: conn, r: cfg.Reader, cfg: cfg, keepAlive: cfg.Connect.KeepAlive, done: make(chan struct{})}
	if s.r == nil {
		s.r = bufReader{bufio.NewReader(conn), cmpOr(cfg.MaxRead, MaxControlPacket)}
	}
	ack, err := s.handshake(ctx)
	if err != nil {
		_ = conn.Close()
		return nil, ack, err
	}
	if ack.ServerKeepAlive > 0 {
		s.keepAlive = ack.ServerKeepAlive
	}
	return s, ack, nil
}

func cmpOr(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

func (s *Session) handshake(ctx context.Context) (Connack, error) {
	_ = s.conn.SetDeadline(s.cfg.Deadline)
	stop := context.AfterFunc(ctx, func() { _ = s.conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := s.conn.Write(s.cfg.Connect.Encode()); err != nil {
		return Connack{}, fmt.Errorf("send CONNECT: %w", err)
	}
	pk, err := s.r.ReadPacket()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return Connack{}, fmt.Errorf("%w: %w", ErrNoConnack, err)
	}
	if err != nil {
		return Connack{}, fmt.Errorf("read CONNACK: %w", err)
	}
	ack, err := ParseConnack(pk)
	if err != nil {
		return ack, err
	}
	if ack.Code != 0 {
		return ack, &RefusedError{Connack: ack}
	}
	if !stop() {
		return ack, fmt.Errorf("read CONNACK: %w", ctx.Err())
	}
	_ = s.conn.SetDeadline(time.Time{})
	return ack, nil
}

// KeepAlive is the session's keepalive interval: the broker's Server Keep
// Alive if its CONNACK set one, else the CONNECT's.
func (s *Session) KeepAlive() time.Duration { return s.keepAlive }

// Next reads the next packet from the broker; for the owner's exchanges
// after Open and before Run (a SUBSCRIBE's SUBACK). It does not end the
// session on error.
func (s *Session) Next() (*mp.Packet, error) { return s.r.ReadPacket() }

// Run reads the broker's packets until the session ends, passing each but
// a DISCONNECT to handle, in order, on Run's goroutine (handle may Write).
// It sends the PINGREQs when cfg.Ping and applies cfg.ReadDeadline. It
// returns Err.
func (s *Session) Run(handle func(*mp.Packet) error) error {
	if s.cfg.Ping && s.keepAlive > 0 {
		go s.ping()
	}
	for {
		if s.cfg.ReadDeadline && s.keepAlive > 0 {
			_ = s.conn.SetReadDeadline(time.Now().Add(s.keepAlive * 3 / 2))
		}
		pk, err := s.r.ReadPacket()
		switch {
		case err != nil:
		case pk.FixedHeader.Type == mp.Disconnect:
			err = &DisconnectError{Code: pk.ReasonCode, Reason: pk.Properties.ReasonString}
		default:
			err = handle(pk)
		}
		if err != nil {
			s.end(err)
			return s.err
		}
	}
}

var pingreq = []byte{0xC0, 0}

func (s *Session) ping() {
	t := time.NewTicker(s.keepAlive)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if _, err := s.Write(pingreq); err != nil {
				s.end(err)
				return
			}
		}
	}
}

// Write writes p to the connection, in one write under the session's
// lock (see Session for the guarantees). After the end it returns Err
// without writing.
func (s *Session) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.done:
		return 0, s.err
	default:
	}
	if s.cfg.WriteTimeout > 0 {
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	}
	return s.conn.Write(p)
}

// WritePacket encodes one packet with encode (a mochi packet's encoder)
// and writes it.
func (s *Session) WritePacket(encode func(*bytes.Buffer) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.done:
		return s.err
	default:
	}
	s.buf.Reset()
	if err := encode(&s.buf); err != nil {
		return err
	}
	if s.cfg.WriteTimeout > 0 {
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	}
	_, err := s.conn.Write(s.buf.Bytes())
	return err
}

// Disconnect writes a DISCONNECT with reason (0: normal disconnection, the
// broker drops the will), after every Write that returned, and ends the
// session (ErrClosed). Later calls, and calls after the end, do nothing.
func (s *Session) Disconnect(reason byte) {
	pk := []byte{0xE0, 0}
	if reason != 0 {
		pk = []byte{0xE0, 1, reason}
	}
	_, _ = s.Write(pk)
	s.end(ErrClosed)
}

// Close ends the session (ErrClosed) without a DISCONNECT: the broker
// publishes the will, if any.
func (s *Session) Close() { s.end(ErrClosed) }

// End ends the session with err, the reason Err reports, unless it ended
// already.
func (s *Session) End(err error) { s.end(err) }

func (s *Session) end(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
		_ = s.conn.Close()
	})
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended; nil while it runs.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}
