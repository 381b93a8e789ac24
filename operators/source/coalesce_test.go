package source

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	cc := newCoalescingConn(counted)
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
	cc := newCoalescingConn(client)
	defer cc.Close()
	server.Close()
	client.(*net.TCPConn).CloseWrite()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := cc.Write(make([]byte, 1024)); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Write kept succeeding on a closed connection")
		}
		time.Sleep(time.Millisecond)
	}
}
