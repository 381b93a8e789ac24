package mqtt5

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// urler is a broker: mosquitto or the embedded one.
type urler interface{ URL() string }

// startEmbedded starts the embedded broker (mochi-mqtt), which accepts only
// user and password if they are set.
func startEmbedded(t *testing.T, user, password string) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", Username: user, Password: password}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Open()
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// open dials b and opens a session with cfg (Deadline 10 s from now).
func open(t *testing.T, b urler, cfg Config) (*Session, Connack) {
	t.Helper()
	conn, err := Dial(context.Background(), b.URL(), nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Deadline = time.Now().Add(10 * time.Second)
	s, ack, err := Open(context.Background(), conn, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.Connect.ClientID, err)
	}
	t.Cleanup(s.Close)
	return s, ack
}

// subscribe subscribes s to filter at QoS 1 before Run (Next reads the
// SUBACK).
func subscribe(t *testing.T, s *Session, filter string) {
	t.Helper()
	sub := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Subscribe, Qos: 1}, ProtocolVersion: 5, PacketID: 1,
		Filters: mp.Subscriptions{{Filter: filter, Qos: 1}}}
	if err := s.WritePacket(sub.SubscribeEncode); err != nil {
		t.Fatal(err)
	}
	pk, err := s.Next()
	if err != nil || pk.FixedHeader.Type != mp.Suback || pk.ReasonCodes[0] != 1 {
		t.Fatalf("SUBACK: %+v, %v", pk, err)
	}
}

// collector runs a session and keeps the payloads of the PUBLISHes it
// gets, acknowledging each QoS 1 one.
type collector struct {
	mu       sync.Mutex
	payloads map[string]int
	pings    atomic.Int64
	ended    chan error
}

func collect(s *Session) *collector {
	c := &collector{payloads: map[string]int{}, ended: make(chan error, 1)}
	go func() {
		c.ended <- s.Run(func(pk *mp.Packet) error {
			switch pk.FixedHeader.Type {
			case mp.Pingresp:
				c.pings.Add(1)
			case mp.Publish:
				c.mu.Lock()
				c.payloads[string(pk.Payload)]++
				c.mu.Unlock()
				if pk.FixedHeader.Qos == 1 {
					ack := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Puback}, ProtocolVersion: 5, PacketID: pk.PacketID}
					return s.WritePacket(ack.PubackEncode)
				}
			}
			return nil
		})
	}()
	return c
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.payloads)
}

func (c *collector) has(p string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.payloads[p] > 0
}

// TestSession_Connack: Open returns what mosquitto's CONNACK announces (its
// Receive Maximum is max_inflight_messages, its Maximum QoS max_qos) and
// whether it kept the session.
func TestSession_Connack(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.Conf("max_qos 1"))
	c := Connect{ClientID: "limits", KeepAlive: 30 * time.Second}
	s, ack := open(t, b, Config{Connect: c})
	if ack.Present || ack.Limits.ReceiveMax != 1000 || ack.Limits.MaxQoS != 1 {
		t.Errorf("first CONNACK: present %v, limits %+v; want a new session, Receive Maximum 1000, Maximum QoS 1", ack.Present, ack.Limits)
	}
	if s.KeepAlive() != 30*time.Second {
		t.Errorf("KeepAlive %v, want the CONNECT's 30s (mosquitto sets no Server Keep Alive)", s.KeepAlive())
	}
	s.Disconnect(0)
	_, ack = open(t, b, Config{Connect: c})
	if !ack.Present {
		t.Error("second CONNACK: no session present, want the one the first connection left")
	}
}

// TestSession_Refused: a CONNACK refusing the client is a *RefusedError
// naming the reason with the broker's reason string, and the connection
// is closed.
func TestSession_Refused(t *testing.T) {
	b := startEmbedded(t, "eddy", "secret")
	conn, err := Dial(context.Background(), b.URL(), nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(context.Background(), conn, Config{Connect: Connect{ClientID: "x", Username: "eddy", Password: "guess"},
		Deadline: time.Now().Add(10 * time.Second)})
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Connack.Code != 0x86 {
		t.Fatalf("Open: %v, want a refusal with bad_user_name_or_password (0x86)", err)
	}
	want := "the broker refused the connection: bad_user_name_or_password (0x86)"
	if refused.Connack.Reason != "" {
		want += " (the broker says: " + refused.Connack.Reason + ")"
	}
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, err := conn.Write([]byte{0xC0, 0}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after the refusal: %v, want the connection closed", err)
	}
	if _, ack := open(t, b, Config{Connect: Connect{ClientID: "y", Username: "eddy", Password: "secret"}}); ack.Code != 0 {
		t.Errorf("right credentials: CONNACK %+v", ack)
	}
}

// peer accepts one TCP connection, hands it to serve, and returns the
// client's end of it. It is no broker: it stands for one that stops
// answering in a way a real broker is not made to.
func peer(t *testing.T, serve func(net.Conn)) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		if c, err := ln.Accept(); err == nil {
			serve(c)
		}
	}()
	conn, err := Dial(context.Background(), "tcp://"+ln.Addr().String(), nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestSession_NoConnack: a peer that closes the connection after the
// CONNECT unanswered is ErrNoConnack, with the read error.
func TestSession_NoConnack(t *testing.T) {
	conn := peer(t, func(c net.Conn) {
		var b [64]byte
		_, _ = c.Read(b[:])
		c.Close()
	})
	_, _, err := Open(context.Background(), conn, Config{Connect: Connect{ClientID: "x"}, Deadline: time.Now().Add(10 * time.Second)})
	if !errors.Is(err, ErrNoConnack) {
		t.Fatalf("Open: %v, want ErrNoConnack", err)
	}
}

// TestSession_OpenCancelled: Open gives up when its context ends, also
// while the deadline is far.
func TestSession_OpenCancelled(t *testing.T) {
	quiet := make(chan net.Conn, 1)
	conn := peer(t, func(c net.Conn) { quiet <- c }) // never answers
	defer func() { (<-quiet).Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := Open(ctx, conn, Config{Connect: Connect{ClientID: "x"}, Deadline: time.Now().Add(time.Hour)})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Open: %v, want the read cut short", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open did not return within 10 s of its context's end")
	}
}

// TestSession_KeepAlive: with Ping, the session sends a PINGREQ every
// keepalive and mosquitto's PINGRESPs reach the handler; with
// ReadDeadline too, the session lives on through them.
func TestSession_KeepAlive(t *testing.T) {
	b := mosquitto.Start(t)
	s, _ := open(t, b, Config{Connect: Connect{ClientID: "pinger", KeepAlive: time.Second, CleanStart: true}, Ping: true, ReadDeadline: true})
	c := collect(s)
	await.True(t, 20*time.Second, "three PINGRESPs", func() bool { return c.pings.Load() >= 3 })
	if err := s.Err(); err != nil {
		t.Fatalf("session ended: %v", err)
	}
}

// TestSession_ReadDeadline: with ReadDeadline and no PINGREQs, a broker
// that sends nothing ends the session after 1.5 keepalives (mosquitto
// itself drops the silent client then too: the session ends either way,
// within a few keepalives).
func TestSession_ReadDeadline(t *testing.T) {
	b := mosquitto.Start(t)
	s, _ := open(t, b, Config{Connect: Connect{ClientID: "silent", KeepAlive: time.Second, CleanStart: true}, ReadDeadline: true})
	start := time.Now()
	c := collect(s)
	select {
	case err := <-c.ended:
		if err == nil || s.Err() != err {
			t.Errorf("Run returned %v, Err %v: want the same error", err, s.Err())
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("session ended after %v, before one keepalive", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("session still running 20 s after the last packet, keepalive 1 s")
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done open after the end")
	}
}

// TestSession_TakenOver: a second connection with the same client id ends
// the first one's session with the broker's DISCONNECT (0x8E; the embedded
// broker sends it, mosquitto 2.0.11 closes the connection without one);
// Done closes, and a Write after it fails with that reason.
func TestSession_TakenOver(t *testing.T) {
	b := startEmbedded(t, "", "")
	s, _ := open(t, b, Config{Connect: Connect{ClientID: "twin", KeepAlive: 30 * time.Second}})
	c := collect(s)
	open(t, b, Config{Connect: Connect{ClientID: "twin", KeepAlive: 30 * time.Second}})
	var err error
	select {
	case err = <-c.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("first session still running 10 s after the takeover")
	}
	var de *DisconnectError
	if !errors.As(err, &de) || de.Code != 0x8E {
		t.Fatalf("Run: %v, want a DISCONNECT session_taken_over", err)
	}
	want := "the broker disconnected: session_taken_over (0x8e): another client connected with this client id"
	if de.Reason != "" {
		want += ": " + de.Reason
	}
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	<-s.Done()
	if _, werr := s.Write([]byte{0xC0, 0}); werr != err {
		t.Errorf("Write after the end: %v, want %v", werr, err)
	}
}

// TestSession_Will: Disconnect (normal) ends a session without its will;
// Close ends it without a DISCONNECT, and the broker publishes the will.
func TestSession_Will(t *testing.T) {
	b := mosquitto.Start(t)
	watcher, _ := open(t, b, Config{Connect: Connect{ClientID: "watcher", KeepAlive: 30 * time.Second, CleanStart: true}})
	subscribe(t, watcher, "wills/#")
	got := collect(watcher)
	for _, tt := range []struct {
		name string
		end  func(*Session)
		will bool
	}{
		{"disconnect", func(s *Session) { s.Disconnect(0) }, false},
		{"close", (*Session).Close, true},
	} {
		will := &Will{Topic: "wills/" + tt.name, Payload: []byte("gone " + tt.name), QoS: 1}
		s, _ := open(t, b, Config{Connect: Connect{ClientID: tt.name, KeepAlive: 30 * time.Second, CleanStart: true, Will: will}})
		tt.end(s)
		if !errors.Is(s.Err(), ErrClosed) {
			t.Errorf("%s: Err %v, want ErrClosed", tt.name, s.Err())
		}
	}
	// The will of "close" is published; by then "disconnect"'s would have
	// been too (the broker handles the connections' ends in order).
	await.True(t, 10*time.Second, "the will of the closed session", func() bool { return got.has("gone close") })
	if got.has("gone disconnect") {
		t.Error("the broker published the will of a session ended by a normal DISCONNECT")
	}
}

// TestSession_ConcurrentWrites: PUBLISHes written from many goroutines at
// once reach the broker whole (each Write's bytes together), while Run
// writes PUBACKs and PINGREQs go out.
func TestSession_ConcurrentWrites(t *testing.T) {
	b := mosquitto.Start(t)
	sub, _ := open(t, b, Config{Connect: Connect{ClientID: "sub", KeepAlive: 30 * time.Second, CleanStart: true}})
	subscribe(t, sub, "w/#")
	got := collect(sub)
	pub, _ := open(t, b, Config{Connect: Connect{ClientID: "pub", KeepAlive: time.Second, CleanStart: true}, Ping: true})
	collect(pub)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				pk := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish}, ProtocolVersion: 5,
					TopicName: fmt.Sprintf("w/%d", w), Payload: fmt.Appendf(nil, "%d-%d", w, i)}
				if err := pub.WritePacket(pk.PublishEncode); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	await.True(t, 20*time.Second, "every message at the subscriber", func() bool { return got.count() == writers*each })
	if err := pub.Err(); err != nil {
		t.Errorf("publisher's session ended: %v", err)
	}
}
