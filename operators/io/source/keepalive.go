package source

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/proxy"
)

// DefaultPingTimeout is MQTTOptions.PingTimeout's default (paho's own).
const DefaultPingTimeout = 10 * time.Second

// pahoPingTimeout is the ping timeout the source gives paho: never. paho
// drops a connection when no PINGRESP came within its ping timeout of the
// PINGREQ, whatever else arrived meanwhile. That misjudges a live broker
// under load twice over: on tcp:// connections the source reads the PUBLISH
// packets itself, so a PINGRESP queued behind a long run of them reaches
// paho late, and a broker starved of CPU (mosquitto reads a client's socket
// a packet at a time) answers a PINGREQ late while it keeps streaming
// messages. The connection's liveness watchdog judges instead (liveness);
// paho still sends the PINGREQs and owns the session.
const pahoPingTimeout = time.Duration(1<<63 - 1)

// errPingTimeout is the reason a connection is dropped by its liveness
// watchdog; paho reports it as the connection-lost error.
var errPingTimeout = errors.New("source: mqtt: nothing received from the broker within the ping timeout after a PINGREQ")

// liveness is a broker connection's keepalive rule: any bytes read from the
// broker prove the connection alive, and it is dead only when a PINGREQ is
// unanswered and nothing at all has arrived for timeout since the PINGREQ
// was written or since the last read, whichever is later. Dead, the
// connection is closed, so paho's reader fails with errPingTimeout and
// paho reports the connection lost.
//
// The reader calls read per read(2) that returned bytes and ponged per
// PINGRESP; the writer calls pinged per PINGREQ. The timer runs only while
// a PINGREQ is unanswered.
type liveness struct {
	timeout  time.Duration // 0: no watchdog
	lastRead atomic.Int64  // UnixNano of the last read that returned bytes
	pingSent atomic.Int64  // UnixNano of the unanswered PINGREQ; 0: none
	dead     atomic.Bool

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	kill    func() // closes the connection
}

// read records bytes read from the broker now.
func (l *liveness) read() {
	if l.timeout > 0 {
		l.lastRead.Store(time.Now().UnixNano())
	}
}

// pinged records a PINGREQ written now and arms the watchdog.
func (l *liveness) pinged() {
	if l.timeout <= 0 {
		return
	}
	l.pingSent.Store(time.Now().UnixNano())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(l.timeout, l.check)
	} else {
		l.timer.Reset(l.timeout)
	}
}

// ponged records a PINGRESP.
func (l *liveness) ponged() { l.pingSent.Store(0) }

// check is the watchdog: it kills the connection if the rule says dead,
// else waits for the next moment it could.
func (l *liveness) check() {
	sent := l.pingSent.Load()
	if sent == 0 {
		return
	}
	quiet := time.Duration(time.Now().UnixNano() - max(sent, l.lastRead.Load()))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if quiet < l.timeout {
		l.timer.Reset(l.timeout - quiet)
		return
	}
	l.dead.Store(true)
	l.stopped = true
	go l.kill() // not under mu: closing may wait on the connection
}

// stop disarms the watchdog for good.
func (l *liveness) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// readErr is err, or errPingTimeout when the watchdog closed the
// connection under the read.
func (l *liveness) readErr(err error) error {
	if err != nil && l.dead.Load() {
		return errPingTimeout
	}
	return err
}

// isPingreq reports whether a write is paho's PINGREQ: paho writes each
// packet in one Write, and a PINGREQ is these two bytes.
func isPingreq(p []byte) bool { return len(p) == 2 && p[0] == 0xc0 && p[1] == 0 }

// clockedReader is what a coalescingConn's read buffer reads from: the
// connection, each read that returns bytes recorded in its liveness.
type clockedReader struct {
	c net.Conn
	l *liveness
}

func (r clockedReader) Read(p []byte) (int, error) {
	n, err := r.c.Read(p)
	if n > 0 {
		r.l.read()
	}
	return n, r.l.readErr(err)
}

// liveConn applies liveness to a connection whose packets paho reads
// itself (ssl://, ws://, wss://): it records every read, and follows the
// packet framing of what it reads to see the PINGRESPs.
type liveConn struct {
	net.Conn
	live liveness
	// framing state of the bytes read so far: in a packet's remaining
	// length (lenShift > 0 or just after its first byte), or skipping its
	// body (skip > 0).
	hdr      byte
	inLen    bool
	lenShift uint
	size     int
	skip     int
}

func newLiveConn(c net.Conn, timeout time.Duration) *liveConn {
	lc := &liveConn{Conn: c}
	lc.live.timeout = timeout
	lc.live.kill = func() { _ = c.Close() }
	return lc
}

func (c *liveConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.live.read()
		c.frame(p[:n])
	}
	return n, c.live.readErr(err)
}

// frame advances the framing over b and records each PINGRESP.
func (c *liveConn) frame(b []byte) {
	for len(b) > 0 {
		switch {
		case c.skip > 0:
			k := min(c.skip, len(b))
			c.skip -= k
			b = b[k:]
		case !c.inLen:
			c.hdr, c.inLen, c.lenShift, c.size = b[0], true, 0, 0
			b = b[1:]
		default:
			v := b[0]
			b = b[1:]
			c.size |= int(v&0x7f) << c.lenShift
			c.lenShift += 7
			if v&0x80 != 0 && c.lenShift < 28 {
				continue
			}
			c.inLen, c.skip = false, c.size
			if c.hdr == 0xd0 && c.size == 0 { // PINGRESP
				c.live.ponged()
			}
		}
	}
}

func (c *liveConn) Write(p []byte) (int, error) {
	if isPingreq(p) {
		c.live.pinged()
	}
	return c.Conn.Write(p)
}

func (c *liveConn) Close() error {
	c.live.stop()
	return c.Conn.Close()
}

// liveDial opens an ssl://, ws:// or wss:// connection as paho would
// (paho's openConnection, which is not exported) and wraps it in a
// liveConn.
func liveDial(uri *url.URL, o paho.ClientOptions, timeout time.Duration) (net.Conn, error) {
	d := o.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 30 * time.Second}
	}
	var c net.Conn
	var err error
	switch uri.Scheme {
	case "ws", "wss":
		u := *uri // the websocket dialer refuses user info
		u.User = nil
		var tc *tls.Config
		if uri.Scheme == "wss" {
			tc = o.TLSConfig
		}
		c, err = paho.NewWebsocket(u.String(), tc, o.ConnectTimeout, o.HTTPHeaders, o.WebsocketOptions)
	case "ssl", "tls", "mqtts":
		if os.Getenv("all_proxy") == "" {
			c, err = tls.DialWithDialer(d, "tcp", uri.Host, o.TLSConfig)
			break
		}
		var raw net.Conn
		if raw, err = proxy.FromEnvironment().Dial("tcp", uri.Host); err != nil {
			break
		}
		tc := tls.Client(raw, o.TLSConfig)
		if err = tc.Handshake(); err != nil {
			_ = raw.Close()
			break
		}
		c = tc
	default:
		return nil, fmt.Errorf("source: mqtt: scheme %q", uri.Scheme)
	}
	if err != nil {
		return nil, err
	}
	return newLiveConn(c, timeout), nil
}
