package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mqttProxy relays an MQTT client's TCP connections to a broker, packet by
// packet. It can swallow the client's PUBACKs (holdAcks), as a process
// killed right after writing them loses them: the broker never sees the
// acks of messages the agent logged, and must send them again after the
// resume. With a trace path it also writes every PUBLISH and PUBACK both
// ways, one line each: time, connection, direction, packet, packet id,
// DUP, the reading's seq.
type mqttProxy struct {
	ln       net.Listener
	broker   string
	holdAcks atomic.Bool
	held     atomic.Int64 // PUBACKs swallowed

	mu    sync.Mutex
	out   *bufio.Writer // nil: no trace
	conns int
}

// startMQTTProxy listens on loopback and relays to broker (host:port). trace,
// if not "", is the file the trace goes to.
func startMQTTProxy(t *testing.T, broker, trace string) *mqttProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &mqttProxy{ln: ln, broker: broker}
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
		b, err := net.Dial("tcp", p.broker)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns++
		n := p.conns
		p.mu.Unlock()
		go p.relay(n, "B>A", b, c)
		go p.relay(n, "A>B", c, b)
	}
}

var traceSeq = regexp.MustCompile(`"seq":(-?\d+)`)

// relay copies packets from one side to the other until either fails.
func (p *mqttProxy) relay(n int, dir string, from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	r := bufio.NewReaderSize(from, 1<<16)
	for {
		pkt, err := readPacket(r)
		if err != nil {
			return
		}
		body := pkt[len(pkt)-packetBodyLen(pkt):]
		switch pkt[0] >> 4 {
		case 3: // PUBLISH
			if p.out != nil && len(body) >= 2 {
				tl := int(binary.BigEndian.Uint16(body))
				rest, id := body[min(2+tl, len(body)):], 0
				if (pkt[0]>>1)&3 > 0 && len(rest) >= 2 {
					id, rest = int(binary.BigEndian.Uint16(rest)), rest[2:]
				}
				seq := ""
				if m := traceSeq.FindSubmatch(rest); m != nil {
					seq = string(m[1])
				}
				p.trace(n, dir, "PUBLISH", id, pkt[0]&8 != 0, seq)
			}
		case 4: // PUBACK
			if dir == "A>B" && p.holdAcks.Load() {
				p.held.Add(1)
				continue
			}
			if p.out != nil && len(body) >= 2 {
				p.trace(n, dir, "PUBACK", int(binary.BigEndian.Uint16(body)), false, "")
			}
		case 2: // CONNACK
			if len(body) >= 2 {
				p.trace(n, dir, fmt.Sprintf("CONNACK sp=%d rc=%d", body[0], body[1]), 0, false, "")
			}
		}
		if _, err := to.Write(pkt); err != nil {
			return
		}
	}
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

func (p *mqttProxy) trace(n int, dir, what string, id int, dup bool, seq string) {
	if p.out == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d := 0
	if dup {
		d = 1
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
