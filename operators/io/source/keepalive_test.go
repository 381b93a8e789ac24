package source

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/cpuhog"
	"github.com/eddy-edge/eddy/scripts/faultbroker"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/scripts/testpki"
)

// TestLiveConn_FramesPingresp: the framing over what paho reads sees a
// PINGRESP however the bytes are split, and not two bytes d0 00 inside a
// PUBLISH.
func TestLiveConn_FramesPingresp(t *testing.T) {
	pub := publishPacket("t", []byte{0xd0, 0x00, 0xd0, 0x00}, 1, false, 7)
	big := publishPacket("t", make([]byte, 300), 0, false, 0) // two-byte length
	for _, c := range []struct {
		name   string
		stream []byte
		pong   bool
	}{
		{"pingresp", []byte{0xd0, 0}, true},
		{"publish with d0 00 inside", pub, false},
		{"publish then pingresp", append(append([]byte{}, pub...), 0xd0, 0), true},
		{"long publish then pingresp", append(append([]byte{}, big...), 0xd0, 0), true},
		{"connack", []byte{0x20, 2, 0, 0}, false},
	} {
		for _, chunk := range []int{1, 2, 3, 7, 1000} {
			t.Run(fmt.Sprintf("%s/%d", c.name, chunk), func(t *testing.T) {
				var lc liveConn
				lc.live.pingSent.Store(1)
				for b := c.stream; len(b) > 0; {
					k := min(chunk, len(b))
					lc.frame(b[:k])
					b = b[k:]
				}
				if pong := lc.live.pingSent.Load() == 0; pong != c.pong {
					t.Fatalf("PINGRESP seen %v, want %v", pong, c.pong)
				}
				if lc.inLen || lc.skip != 0 {
					t.Fatalf("framing ends mid-packet: inLen %v skip %d", lc.inLen, lc.skip)
				}
			})
		}
	}
}

// TestMQTT_KeepaliveWhileStreaming: the broker holds every PINGRESP back
// 6 s, three ping timeouts, while it streams messages: the bytes prove the
// connection alive and it stays up. Then the broker goes fully silent: the
// connection is dropped within keepalive + ping timeout (and the checks'
// granularity), and made again once the broker answers.
func TestMQTT_KeepaliveWhileStreaming(t *testing.T) {
	b, err := faultbroker.Start(faultbroker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	const id = "eddy-keepalive-stream"
	src := NewMQTT(MQTTOptions{Broker: b.URL(), ClientID: id, Topics: []string{"t"}, QoS: 1,
		KeepAlive: time.Second, PingTimeout: 2 * time.Second, ReconnectMin: 20 * time.Millisecond}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)

	b.SetPingDelay(6 * time.Second)
	start := time.Now()
	n := 0
	tick := time.NewTicker(20 * time.Millisecond) // a steady stream: 50 messages/s
	defer tick.Stop()
	for time.Since(start) < 8*time.Second {
		<-tick.C
		b.Publish("t", []byte(strconv.Itoa(n)))
		n++
		AckAll(r.receive(t, 1, 10*time.Second))
	}
	if st := src.(StatsReporter).Stats(); st.Reconnects != 0 || !st.Connected || st.Received != uint64(n) {
		t.Fatalf("stats %+v, want %d received on one connection", st, n)
	}
	if p := b.SessionStats(id).Pings; p < 2 {
		t.Fatalf("%d PINGREQs in 8 s at a 1 s keepalive", p)
	}

	b.SetPingDelay(0)
	b.SetSilent(id, true)
	silent := time.Now()
	await.True(t, 5*time.Second, "the connection to a silent broker to drop", func() bool { return !src.(StatsReporter).Stats().Connected })
	t.Logf("silent broker: connection dropped after %v", time.Since(silent).Round(time.Millisecond))
	b.SetSilent(id, false)
	waitConnected(t, src)
	if st := src.(StatsReporter).Stats(); st.Reconnects != 1 {
		t.Fatalf("stats %+v, want 1 reconnect", st)
	}
}

// TestMQTT_KeepaliveOnStarvedCPU: every core spins in another process
// while a steady QoS 1 stream goes through a real mosquitto (the README's
// settings) to the source for several 2 s keepalive intervals: the
// connection stays up and every message arrives once.
func TestMQTT_KeepaliveOnStarvedCPU(t *testing.T) {
	broker := mosquitto.Start(t)
	const id = "eddy-starved"
	src := NewMQTT(MQTTOptions{Broker: broker.URL(), ClientID: id, Topics: []string{"s/#"}, QoS: 1,
		KeepAlive: 2 * time.Second, PingTimeout: 2 * time.Second, ReconnectMin: 20 * time.Millisecond}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	cpuhog.Start(t, 0)
	pub := mustPublisher(t, broker.URL(), "pub-starved")

	const n = 20_000 // 2,000 messages/s for ~10 s: five keepalive intervals
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < n; i += 20 {
			<-tick.C
			for j := i; j < i+20; j++ {
				pub.Publish("s/"+strconv.Itoa(j%50), 1, false, strconv.Itoa(j))
			}
		}
		done <- nil
	}()
	seen := make([]bool, n)
	for got := 0; got < n; {
		msgs := r.receive(t, 1, 60*time.Second)
		for _, v := range seqs(t, msgs) {
			if seen[v] {
				t.Fatalf("message %d twice", v)
			}
			seen[v] = true
			got++
		}
		AckAll(msgs)
	}
	<-done
	if st := src.(StatsReporter).Stats(); st.Reconnects != 0 || !st.Connected {
		t.Fatalf("stats %+v: the connection was lost on a starved CPU", st)
	}
}

// TestLiveConn_Rule: after a PINGREQ, bytes from the broker keep the
// connection alive without a PINGRESP; once they stop, the read fails with
// errPingTimeout a ping timeout after the last of them. After a PINGRESP,
// silence is no failure.
func TestLiveConn_Rule(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, c := range []struct {
		name    string
		pingres bool // the broker answers the PINGREQ
	}{
		{"stream without PINGRESP, then silence", false},
		{"PINGRESP, then silence", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, server := tcpPair(t)
			lc := newLiveConn(client, timeout)
			defer lc.Close()
			failed := make(chan error, 1)
			go func() {
				var buf [256]byte
				for {
					if _, err := lc.Read(buf[:]); err != nil {
						failed <- err
						return
					}
				}
			}()
			if _, err := lc.Write([]byte{0xc0, 0}); err != nil {
				t.Fatal(err)
			}
			pub := publishPacket("t", []byte("x"), 0, false, 0)
			var last time.Time // when the broker last sent
			// 800 ms of messages: over two ping timeouts.
			for range 8 {
				if _, err := server.Write(pub); err != nil {
					t.Fatal(err)
				}
				last = time.Now()
				select {
				case err := <-failed:
					t.Fatalf("read failed while the broker streams: %v", err)
				case <-time.After(timeout / 3):
				}
			}
			if c.pingres {
				if _, err := server.Write([]byte{0xd0, 0}); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-failed:
				if c.pingres {
					t.Fatalf("read failed after the PINGRESP: %v", err)
				}
				if err != errPingTimeout {
					t.Fatalf("read failed with %v, want errPingTimeout", err)
				}
				if d := time.Since(last); d < timeout-50*time.Millisecond || d > timeout+700*time.Millisecond {
					t.Fatalf("dropped %v after the last bytes, want about %v", d, timeout)
				}
			case <-time.After(3 * timeout):
				if !c.pingres {
					t.Fatal("connection still up 3 ping timeouts after the broker went silent")
				}
			}
		})
	}
}

// TestMQTT_SSLThroughLiveConn: on ssl:// the source dials through liveDial
// (paho reads the packets, liveConn watches them): it connects to
// mosquitto's TLS listener and receives every message once.
func TestMQTT_SSLThroughLiveConn(t *testing.T) {
	ca := testpki.NewCA(t, t.TempDir(), "test")
	cert, key := ca.Issue(t, "broker")
	tlsPort := loopback.MustPort(t)
	broker := mosquitto.Start(t, mosquitto.Conf(
		fmt.Sprintf("listener %d 127.0.0.1", tlsPort), "cafile "+ca.CAFile, "certfile "+cert, "keyfile "+key))
	src := NewMQTT(MQTTOptions{Broker: fmt.Sprintf("ssl://127.0.0.1:%d", tlsPort), ClientID: "eddy-ssl", Topics: []string{"t"}, QoS: 1,
		TLS: ca.ClientTLS(t, "", ""), KeepAlive: time.Second, PingTimeout: time.Second}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-ssl")
	mustPublish(t, pub, "t", 1, numbered(0, 200)...)
	got := r.receive(t, 200, 30*time.Second)
	for i, v := range seqs(t, got) {
		if v != i {
			t.Fatalf("message %d is %d", i, v)
		}
	}
	AckAll(got)
	if st := src.(StatsReporter).Stats(); st.Reconnects != 0 || !st.Connected {
		t.Fatalf("stats %+v, want one connection", st)
	}
}
