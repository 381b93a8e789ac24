package source

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

// countingConn counts the writes that reach the connection.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestCoalescingConn_OrderAndFewerWrites: 20,000 small writes from one
// goroutine (as paho's writer makes them) arrive intact and in order, in
// fewer write calls than writes, and Close sends what is still buffered.
func TestCoalescingConn_OrderAndFewerWrites(t *testing.T) {
	client, server := tcpPair(t)
	counted := &countingConn{Conn: client}
	cc := newCoalescingConn(counted, 0)
	var want bytes.Buffer
	var got bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(&got, server) })
	const n = 20000
	for i := range n {
		p := []byte{0x40, 0x02, byte(i >> 8), byte(i)} // a PUBACK's size
		want.Write(p)
		if _, err := cc.Write(p); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := cc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("received %d bytes, want %d: not the same bytes in the same order", got.Len(), want.Len())
	}
	w := counted.writes.Load()
	t.Logf("%d writes of 4 bytes took %d write calls", n, w)
	if w >= n {
		t.Fatalf("%d write calls for %d writes: nothing coalesced", w, n)
	}
}

// TestCoalescingConn_ErrorSurfaces: once the connection fails, Write
// returns an error instead of buffering forever.
func TestCoalescingConn_ErrorSurfaces(t *testing.T) {
	client, server := tcpPair(t)
	cc := newCoalescingConn(client, 0)
	defer cc.Close()
	server.Close()
	client.(*net.TCPConn).CloseWrite()
	await.True(t, 20*time.Second, "Write to fail on a closed connection", func() bool {
		_, err := cc.Write(make([]byte, 1024))
		return err != nil
	})
}

// publishPacket encodes an MQTT 3.1.1 PUBLISH.
func publishPacket(topic string, payload []byte, qos byte, dup bool, id uint16) []byte {
	body := []byte{byte(len(topic) >> 8), byte(len(topic))}
	body = append(body, topic...)
	if qos > 0 {
		body = append(body, byte(id>>8), byte(id))
	}
	body = append(body, payload...)
	hdr := 0x30 | qos<<1
	if dup {
		hdr |= 0x08
	}
	p := []byte{hdr}
	for n := len(body); ; {
		b := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			b |= 0x80
		}
		p = append(p, b)
		if n == 0 {
			break
		}
	}
	return append(p, body...)
}

// TestCoalescingConn_ReadsPublishes: with a publishReader, Read queues
// every PUBLISH (QoS 0, 1 and 2, DUP, an empty and a payload larger than the
// read buffer), even when the broker's bytes arrive split at every possible
// point, and returns exactly the other packets to its caller; AckAll then
// writes PUBACK / PUBREC in order, in one write.
func TestCoalescingConn_ReadsPublishes(t *testing.T) {
	big := bytes.Repeat([]byte("x"), readBufferSize+100)
	type want struct {
		topic, payload string
		qos            byte
		dup            bool
		id             uint16
	}
	wants := []want{
		{"a/1", `{"v":1}`, 1, false, 1},
		{"a/2", "", 0, false, 0},
		{"a/1", `{"v":3}`, 2, true, 513},
		{"b", string(big), 1, false, 2},
		{"a/1", "last", 1, false, 65535},
	}
	pingresp := []byte{0xd0, 0x00}
	pubrel := []byte{0x62, 0x02, 0x02, 0x01}
	var stream, others []byte
	for i, w := range wants {
		stream = append(stream, publishPacket(w.topic, []byte(w.payload), w.qos, w.dup, w.id)...)
		if i == 2 {
			stream = append(stream, pingresp...)
			stream = append(stream, pubrel...)
			others = append(append(others, pingresp...), pubrel...)
		}
	}
	for _, chunk := range []int{len(stream), 1, 3, 7, 1000} {
		client, server := tcpPair(t)
		cc := newCoalescingConn(client, 0)
		var mu sync.Mutex // the reader goroutine appends, the test polls
		var got []Message
		var qoss []byte
		wakes := 0
		cc.recv = publishReader{
			queue: func(m Message, qos byte) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, m)
				qoss = append(qoss, qos)
			},
			wake: func() { mu.Lock(); wakes++; mu.Unlock() },
		}
		go func() {
			for b := stream; len(b) > 0; {
				n := min(chunk, len(b))
				if _, err := server.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
			}
		}()
		passed := make([]byte, len(others))
		if _, err := io.ReadFull(cc, passed); err != nil {
			t.Fatalf("chunk %d: Read: %v", chunk, err)
		}
		if !bytes.Equal(passed, others) {
			t.Fatalf("chunk %d: Read returned % x, want % x", chunk, passed, others)
		}
		// The last publishes follow the passed packets: read until they are
		// queued (Read blocks afterwards; the connection's close ends it).
		go func() { io.Copy(io.Discard, cc) }()
		await.Until(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if n := len(got); n != len(wants) {
				return fmt.Errorf("chunk %d: %d of %d publishes queued", chunk, n, len(wants))
			}
			return nil
		})
		for i, w := range wants {
			m := got[i]
			if m.Topic != w.topic || string(m.Payload) != w.payload || qoss[i] != w.qos || m.Dup != w.dup || m.Arrival == 0 {
				t.Fatalf("chunk %d: message %d is %q %d bytes qos %d dup %v, want %q %d bytes qos %d dup %v",
					chunk, i, m.Topic, len(m.Payload), qoss[i], m.Dup, w.topic, len(w.payload), w.qos, w.dup)
			}
			if (m.conn != nil) != (w.qos > 0) || w.qos > 0 && m.ackID != w.id {
				t.Fatalf("chunk %d: message %d ack id %d on %p, want %d", chunk, i, m.ackID, m.conn, w.id)
			}
		}
		mu.Lock()
		if wakes == 0 {
			t.Fatalf("chunk %d: the consumer was never woken", chunk)
		}
		AckAll(got)
		AckAll(got) // a second time: nothing
		want := []byte{0x40, 2, 0, 1, 0x50, 2, 2, 1, 0x40, 2, 0, 2, 0x40, 2, 0xff, 0xff}
		acks := make([]byte, len(want))
		server.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(server, acks); err != nil || !bytes.Equal(acks, want) {
			t.Fatalf("chunk %d: acks % x (%v), want % x", chunk, acks, err, want)
		}
		mu.Unlock()
		server.Close()
		cc.Close()
	}
}

// TestReadPause: a read(2) that got a few bytes holds the next one until
// readInterval after it; a full-ish read, the first read and a quiet
// connection do not wait.
func TestReadPause(t *testing.T) {
	const prev = int64(1_000_000_000)
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name string
		got  int
		now  int64
		want time.Duration
	}{
		{"busy, small read: waits out the interval", 600, prev + 1*ms, readInterval - time.Millisecond},
		{"right after a small read: the whole interval", 1, prev, readInterval},
		{"interval passed: no wait", 600, prev + int64(readInterval), 0},
		{"quiet connection: no wait", 600, prev + 1000*ms, 0},
		{"half the buffer or more: no wait", readBufferSize / 2, prev, 0},
		{"full buffer: no wait", readBufferSize, prev, 0},
		{"no read yet: no wait", 0, prev, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readPause(prev, tc.got, tc.now); got != tc.want {
				t.Errorf("readPause(%d, %d, %d) = %v, want %v", prev, tc.got, tc.now, got, tc.want)
			}
		})
	}
}
