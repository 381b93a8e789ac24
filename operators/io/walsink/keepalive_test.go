package walsink

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/faultbroker"
)

// TestSink_KeepaliveWhileAcksFlow: the upstream broker (the fault broker)
// holds every PINGRESP back 2.5 s, two and a half keepalives, while
// results and the broker's answers to them (PUBRECs and PUBCOMPs; PUBACKs
// at QoS 1) flow: the answers prove the connection alive, it stays up, and
// every result arrives once. Then the broker goes silent: the sink drops
// the connection within the bound (a keepalive to its PINGREQ, one more to
// judge, and the ticks) and connects again once the broker answers.
func TestSink_KeepaliveWhileAcksFlow(t *testing.T) {
	const (
		keepAlive = time.Second
		pingDelay = 5 * keepAlive / 2
		// Results flow for this long after each PINGREQ: past its delayed
		// PINGRESP, with a keepalive to spare for a late timer.
		stream = pingDelay + keepAlive
		cycles = 2
	)
	for _, qos := range []byte{2, 1} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			b, err := faultbroker.Start(faultbroker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Stop)
			c := startCollector(t, b.URL(), "up/#")
			id := fmt.Sprintf("walsink-keepalive-qos%d", qos)
			s, lb := openLogged(t, t.TempDir(), Options{Broker: b.URL(), ClientID: id, QoS: qos, KeepAlive: keepAlive,
				ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond, DialTimeout: keepAlive})
			await.True(t, 5*time.Second, `s.Stats().Connected`, func() bool { return s.Stats().Connected })

			b.SetPingDelay(pingDelay)
			var want []string
			epoch := uint64(1)
			for range cycles {
				// Idle: the sink sends a PINGREQ after a keepalive without
				// sending, and the broker holds the answer back.
				pings := b.SessionStats(id).Pings
				await.True(t, 5*keepAlive, `b.SessionStats(id).Pings > pings`, func() bool { return b.SessionStats(id).Pings > pings })
				pinged := time.Now()
				tick := time.NewTicker(20 * time.Millisecond) // 50 results/s, each answered
				for time.Since(pinged) < stream {
					<-tick.C
					want = append(want, writeEpochs(t, s, epoch, epoch, 1)...)
					epoch++
				}
				tick.Stop()
			}
			got := c.waitFor(t, len(want), 30*time.Second)
			checkExactlyOnce(t, got, want)
			st := b.SessionStats(id)
			if st.Connects != 1 || !s.Stats().Connected || strings.Contains(lb.String(), "keepalive expired") {
				t.Fatalf("broker stats %+v, sink stats %+v: the connection was dropped while answers flowed", st, s.Stats())
			}
			if st.Pings < cycles {
				t.Fatalf("%d PINGREQs, want at least %d", st.Pings, cycles)
			}
			t.Logf("%d results over one connection, %d PINGREQs answered %v late each", len(want), st.Pings, pingDelay)

			b.SetPingDelay(0)
			b.SetSilent(id, true)
			silent := time.Now()
			// The bound is 2.5 s (2 × keepalive, and two ticks of 250 ms);
			// the rest is slack for a loaded machine.
			await.True(t, 4*keepAlive+2*time.Second, `!s.Stats().Connected`, func() bool { return !s.Stats().Connected })
			dropped := time.Since(silent)
			if !strings.Contains(lb.String(), "keepalive expired") {
				t.Fatalf("dropped %v after the broker went silent, but not by the keepalive", dropped)
			}
			t.Logf("silent broker: connection dropped after %v", dropped.Round(time.Millisecond))
			b.SetSilent(id, false)
			await.True(t, 10*time.Second, `s.Stats().Connected && b.SessionStats(id).Connected`, func() bool { return s.Stats().Connected && b.SessionStats(id).Connected })
		})
	}
}
