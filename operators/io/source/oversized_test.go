package source

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// readerOnly is a coalescingConn reading data with no connection behind
// it: readPacket uses only the read side.
func readerOnly(data []byte, maxSize int, queue func(Message, byte)) *coalescingConn {
	return &coalescingConn{r: bufio.NewReaderSize(bytes.NewReader(data), readBufferSize),
		recv: publishReader{queue: queue, wake: func() {}, maxSize: maxSize}}
}

// TestCoalescingConn_OversizedPublish: a PUBLISH over the limit between two
// ordinary ones is queued TooLarge with its first TooLargeKeep bytes, read
// into at most maxPublishHead bytes of memory however long it is; the next
// message is intact.
func TestCoalescingConn_OversizedPublish(t *testing.T) {
	for _, size := range []int{4 << 10, 200 << 10, 8 << 20} {
		var stream []byte
		stream = append(stream, publishPacket("a", []byte("before"), 1, false, 1)...)
		stream = append(stream, publishPacket("big", bytes.Repeat([]byte("x"), size), 1, false, 2)...)
		stream = append(stream, publishPacket("a", []byte("after"), 1, false, 3)...)
		var got []Message
		c := readerOnly(stream, 1<<10, func(m Message, _ byte) { got = append(got, m) })
		for {
			if err := c.readPacket(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("size %d: %v", size, err)
				}
				break
			}
		}
		if len(got) != 3 || string(got[0].Payload) != "before" || string(got[2].Payload) != "after" || got[0].TooLarge || got[2].TooLarge {
			t.Fatalf("size %d: got %d messages around the big one, want before and after intact", size, len(got))
		}
		if m := got[1]; !m.TooLarge || m.Topic != "big" || len(m.Payload) != TooLargeKeep || m.ackID != 2 {
			t.Fatalf("size %d: big message TooLarge %v topic %q %d bytes id %d", size, m.TooLarge, m.Topic, len(m.Payload), m.ackID)
		}
		if cap(c.in.big) > 1<<10+2+65535+2+8<<10 && cap(c.in.big) > maxPublishHead+8<<10 {
			t.Fatalf("size %d: read buffer grew to %d bytes", size, cap(c.in.big))
		}
	}
}

// FuzzPublishReader feeds the PUBLISH reader a packet whose declared length
// may lie about its body, followed by an ordinary packet. It must never
// panic, never hold more memory than the limit allows, and queue a payload
// over the limit only TooLarge and cut.
func FuzzPublishReader(f *testing.F) {
	f.Add(uint32(12), "t", []byte("hello"), uint8(1), uint16(1024))
	f.Add(uint32(256<<20-1), "sensors/a", []byte("short"), uint8(1), uint16(100)) // declares 256 MiB
	f.Add(uint32(3), "", []byte{}, uint8(0), uint16(1))
	f.Add(uint32(70000), strings.Repeat("t", 300), bytes.Repeat([]byte{1}, 70000), uint8(2), uint16(10))
	f.Fuzz(func(t *testing.T, declared uint32, topic string, payload []byte, qos uint8, maxSize uint16) {
		declared &= 256<<20 - 1 // MQTT's largest remaining length
		if len(topic) > 65535 {
			topic = topic[:65535]
		}
		body := binary.BigEndian.AppendUint16(nil, uint16(len(topic)))
		body = append(body, topic...)
		if qos%3 > 0 {
			body = append(body, 0, 1)
		}
		body = append(body, payload...)
		pkt := []byte{0x30 | (qos%4)<<1}
		for n := int(declared); ; {
			b := byte(n & 0x7f)
			if n >>= 7; n > 0 {
				b |= 0x80
			}
			pkt = append(pkt, b)
			if n == 0 {
				break
			}
		}
		pkt = append(pkt, body...)
		pkt = append(pkt, publishPacket("next", []byte("ok"), 0, false, 0)...)
		limit := int(maxSize) + 1
		c := readerOnly(pkt, limit, func(m Message, _ byte) {
			if !m.TooLarge && len(m.Payload) > limit {
				t.Fatalf("queued a %d-byte payload over the %d-byte limit, not TooLarge", len(m.Payload), limit)
			}
			if m.TooLarge && len(m.Payload) > TooLargeKeep {
				t.Fatalf("TooLarge message keeps %d bytes", len(m.Payload))
			}
		})
		for range 2 {
			if err := c.readPacket(); err != nil {
				break
			}
		}
		if most := max(limit+2+65535+2, maxPublishHead); cap(c.in.big) > most+most/2 {
			t.Fatalf("declared %d: read buffer of %d bytes, limit %d", declared, cap(c.in.big), limit)
		}
		if cap(c.in.passBuf) > maxControlPacket+8 {
			t.Fatalf("control packet buffer of %d bytes", cap(c.in.passBuf))
		}
	})
}
