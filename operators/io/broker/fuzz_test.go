package broker

import (
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzBrokerPackets sends the embedded broker a CONNECT (MQTT 3.1.1 or 5)
// followed by arbitrary bytes: no packet may crash it, no subscriber may
// see a payload over MaxMessageSize, and it must still accept a client
// afterwards.
func FuzzBrokerPackets(f *testing.F) {
	f.Add(false, []byte{0x30, 0x05, 0x00, 0x01, 't', 'h', 'i'})                                   // QoS 0 publish
	f.Add(true, []byte{0x32, 0x08, 0x00, 0x01, 't', 0x00, 0x01, 0x00, 'h', 'i'})                  // QoS 1, v5
	f.Add(false, []byte{0x30, 0xff, 0xff, 0xff, 0x7f})                                            // declares 256 MiB
	f.Add(true, []byte{0x82, 0x06, 0x00, 0x01, 0x00, 0x00, 0x01, '#'})                            // subscribe
	f.Add(false, append([]byte{0x30, 0x83, 0x01, 0x00, 0x01, 't'}, make([]byte, 128)...))         // payload over the limit
	f.Add(true, []byte{0xe0, 0x00, 0x30, 0x03, 0x00, 0x01, 'x', 0xc0, 0x00, 0xa2, 0x02, 0x00, 1}) // disconnect, then more
	const limit = 100
	b, err := Start(Options{Listen: "127.0.0.1:0", MaxMessageSize: limit}, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	var over atomic.Int64
	b.Subscribe([]string{"#"}, func(_ string, payload []byte) error {
		if len(payload) > limit {
			over.Store(int64(len(payload)))
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, v5 bool, data []byte) {
		conn, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		connect := []byte{0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 30, 0, 2, 'f', 'z'}
		if v5 {
			connect = []byte{0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 30, 0, 0, 2, 'f', 'z'}
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = conn.Write(append(connect, data...))
		_ = conn.Close()
		if n := over.Load(); n > 0 {
			t.Fatalf("a subscriber saw a %d-byte payload over the %d-byte limit", n, limit)
		}
		c, err := tryConnect(b.URL(), "after", "", "")
		if err != nil {
			t.Fatalf("the broker accepts no client after the input: %v", err)
		}
		c.Disconnect(0)
	})
}
