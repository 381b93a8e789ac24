package source

import (
	"net"
	"net/url"
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
)

// coalescingConn turns many small writes into few write(2) calls. paho
// writes every packet with its own write, and a PUBACK is 4 bytes: at 10,000
// QoS 1 messages/s that is 10,000 syscalls a second, each waking the broker.
// Write copies into a buffer and returns; one flusher goroutine writes
// everything buffered in one call, so the acks of a committed batch leave
// together, in order. A write error is returned by the following Writes (a
// lost ack only makes the broker redeliver, which the ingest log's dedup
// recognizes). Reads, deadlines and addresses are the connection's own.
type coalescingConn struct {
	net.Conn
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

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, kick: make(chan struct{}, 1), flushed: make(chan struct{})}
	cc.cond.L = &cc.mu
	go cc.flushLoop()
	return cc
}

// Write buffers p for the flusher; it waits only while coalesceMax bytes are
// buffered already.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	for c.err == nil && !c.closing && len(c.buf) > 0 && len(c.buf)+len(p) > coalesceMax {
		c.cond.Wait()
	}
	if c.err != nil || c.closing {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return 0, err
	}
	c.buf = append(c.buf, p...)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return len(p), nil
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

// coalescingDial is paho's OpenConnectionFunc for plain TCP brokers: it
// dials as paho would (its Dialer, the proxy from the environment) and
// wraps the connection in a coalescingConn.
func coalescingDial(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
	d := o.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 30 * time.Second}
	}
	conn, err := proxy.FromEnvironmentUsing(d).Dial("tcp", uri.Host)
	if err != nil {
		return nil, err
	}
	return newCoalescingConn(conn), nil
}
