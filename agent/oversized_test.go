package agent

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/scripts/await"
)

// TestEmbeddedIntake_OversizedCostsItsSenderOnly: one sensor keeps sending
// a QoS 1 message over its limit (re-sent on every reconnect, as a
// persistent session must) while 10 others publish 1,000 readings each.
// The 10,000 readings are all in the log exactly once, none of the 10
// loses its connection, and the offender is disconnected and counted. The
// offender is refused by the broker's max message size (limits) or, when
// the broker lets it through, by the ingest log, which cannot store it
// (log): either way its commit neighbours are acknowledged normally.
func TestEmbeddedIntake_OversizedCostsItsSenderOnly(t *testing.T) {
	tests := []struct {
		name  string
		bopts broker.Options
		iopts ingest.Options
	}{
		{"limits", broker.Options{MaxMessageSize: 1 << 10}, ingest.Options{}},
		{"log", broker.Options{MaxMessageSize: 64 << 10}, ingest.Options{SegmentBytes: 8 << 10, MaxDiskBytes: 1 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, l, _ := startEmbeddedIntakeWith(t, time.Millisecond, tt.bopts, tt.iopts)
			connect := func(id string, lost func()) paho.Client {
				o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetCleanSession(false).
					SetAutoReconnect(true).SetConnectRetry(true).SetMaxReconnectInterval(50 * time.Millisecond).
					SetConnectionLostHandler(func(paho.Client, error) { lost() })
				c := paho.NewClient(o)
				if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
					t.Fatalf("connect %s: %v", id, tok.Error())
				}
				t.Cleanup(func() { c.Disconnect(100) })
				return c
			}
			var offenderLost, othersLost atomic.Int64
			offender := connect("offender", func() { offenderLost.Add(1) })
			big := strings.Repeat("x", 32<<10)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					tok := offender.Publish("sensors/offender/telemetry", 1, false, big)
					select {
					case <-tok.Done(): // never acknowledged; done when the session gives up
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			})

			const clients, each = 10, 1000
			for c := range clients {
				wg.Go(func() {
					cl := connect(fmt.Sprintf("sensor-%d", c), func() { othersLost.Add(1) })
					toks := make([]paho.Token, each)
					for i := range each {
						toks[i] = cl.Publish(fmt.Sprintf("sensors/s%d/telemetry", c), 1, false, fmt.Sprintf(`{"c":%d,"seq":%d}`, c, i))
					}
					for i, tok := range toks {
						if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
							t.Errorf("sensor %d publish %d not acknowledged: %v", c, i, tok.Error())
							return
						}
					}
				})
			}
			await.True(t, 30*time.Second, `offenderLost.Load() >= 2`, func() bool { return offenderLost.Load() >= 2 })
			close(stop)
			wg.Wait()

			r, err := l.Reader(0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			seen := map[string]bool{}
			for {
				e, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(e.Topic), "offender") {
					t.Fatalf("the oversized message reached the log (%d bytes)", len(e.Payload))
				}
				if seen[string(e.Payload)] {
					t.Fatalf("%s logged twice", e.Payload)
				}
				seen[string(e.Payload)] = true
			}
			if len(seen) != clients*each {
				t.Errorf("%d readings in the log, want %d", len(seen), clients*each)
			}
			if n := othersLost.Load(); n != 0 {
				t.Errorf("the well-behaved sensors lost their connections %d times", n)
			}
			t.Logf("offender disconnected %d times; broker refused %d too large, %d by the log", offenderLost.Load(), b.TooLarge(), b.Rejected())
			if b.TooLarge()+b.Rejected() == 0 {
				t.Error("nothing counted as refused")
			}
		})
	}
}
