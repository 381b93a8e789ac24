package walsink

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/state/vfs"
)

// cutProxy forwards TCP connections to a broker until cut, after which
// nothing more reaches it: the network side of a power cut.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func newCutProxy(t *testing.T, broker string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", broker)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.cut {
				c.Close()
				up.Close()
			} else {
				p.conns = append(p.conns, c, up)
			}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *cutProxy) url() string { return "tcp://" + p.ln.Addr().String() }

// stop closes the listener and every connection: bytes the sink wrote
// before are delivered or lost, none written after arrive.
func (p *cutProxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
}

// TestSink_PowerLossWhilePublishing cuts the power (vfs.NewCrashableMem:
// unsynced writes lost, or torn at random) and the network at once, at
// random moments while the sink publishes to a real mosquitto (with its
// default 20 in flight, and with the README's settings), ten times, then
// runs to the end. The collector must
// hold every output exactly once, in order: the PUBLISH of a flow leaves
// before any record of it is durable, and a flow whose record was lost is
// published again under the same packet id, which the broker knows.
func TestSink_PowerLossWhilePublishing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker through ten power cuts")
	}
	forUpstreams(t, testPowerLossWhilePublishing)
}

func testPowerLossWhilePublishing(t *testing.T, b *mosquitto.Broker, u upstream) {
	maxInflight := u.maxInflight
	const epochs, perEpoch = 60, 50
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	c := startCollector(t, b.URL(), "up/#")
	disk := vfs.NewCrashableMem()
	var completed atomic.Uint64 // the checkpoint store: survives the cut

	run := func(p *cutProxy) (*Sink, chan struct{}) {
		s, err := Open("/data/wal/out", Options{Broker: p.url(), ClientID: "walsink-powerloss",
			ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond, SegmentBytes: 16 << 10,
			MaxInflight: maxInflight, ProtocolVersion: u.version, FS: disk}, testLogger(t))
		if err != nil {
			t.Fatalf("Open after the power cut: %v", err)
		}
		if err := s.Recover(completed.Load()); err != nil {
			t.Fatalf("Recover(%d): %v", completed.Load(), err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			var buf []byte
			msgs := make([]Message, perEpoch)
			for e := completed.Load() + 1; e <= epochs; e++ {
				buf = buf[:0]
				ends := make([]int, perEpoch)
				for i := range perEpoch {
					buf = testPayload(buf, e, i)
					ends[i] = len(buf)
				}
				start := 0
				for i := range perEpoch {
					msgs[i] = Message{Topic: "up/powerloss", Payload: buf[start:ends[i]]}
					start = ends[i]
				}
				if s.Write(e, msgs) != nil || s.PreCommit(e) != nil {
					return // closed by the cut
				}
				completed.Store(e)
				if s.Commit(e) != nil {
					return
				}
				time.Sleep(10 * time.Millisecond) // pacing: a checkpoint interval
			}
		}()
		return s, done
	}
	for round := range 10 {
		p := newCutProxy(t, b.Addr())
		s, done := run(p)
		time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond) // pacing: the moment of the cut
		p.stop()
		before := completed.Load()
		opts := vfs.CrashOptions{}
		if rng.IntN(2) == 0 {
			opts.Rand = rng // torn writes; else strictly what was synced
		}
		disk = disk.CrashClone(opts)
		completed.Store(before)
		s.Close()
		<-done
		completed.Store(before)
		t.Logf("round %d: cut at completed epoch %d, collector has %d", round, before, len(c.received()))
	}
	p := newCutProxy(t, b.Addr())
	s, done := run(p)
	<-done
	waitDrained(t, s, 60*time.Second)
	var want []string
	for e := uint64(1); e <= epochs; e++ {
		for i := range perEpoch {
			want = append(want, string(testID(nil, e, i)))
		}
	}
	c.waitFor(t, len(want), 30*time.Second)
	c.noMoreThan(t, len(want), 300*time.Millisecond) // a late duplicate would arrive by now
	checkExactlyOnce(t, c.received(), want)
	s.Close()
}
