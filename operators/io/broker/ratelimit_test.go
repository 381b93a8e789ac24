package broker

import (
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestTokenBucket: a burst is taken at once, then each publish waits for
// its token; a debt is paid back before the next; idle time refills up to
// the burst only.
func TestTokenBucket(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		takes []time.Duration // times of the takes
		want  []time.Duration // waits
	}{
		{"burst, then the rate", []time.Duration{1, 1, 1, 1, 1}, []time.Duration{0, 0, 0, 100 * ms, 200 * ms}},
		{"paced at the rate", []time.Duration{1, 100 * ms, 200 * ms, 300 * ms, 400 * ms}, []time.Duration{0, 0, 0, 0, 0}},
		{"a wait served refills nothing extra", []time.Duration{1, 1, 1, 1, 100*ms + 1, 100*ms + 1}, []time.Duration{0, 0, 0, 100 * ms, 100 * ms, 200 * ms}},
		{"idle refills to the burst only", []time.Duration{1, 1, 1, 10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}, []time.Duration{0, 0, 0, 0, 0, 0, 100 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tokenBucket{rate: 10, burst: 3}
			for i, at := range tt.takes {
				if got := b.take(at); (got - tt.want[i]).Abs() > time.Microsecond {
					t.Errorf("take %d at %v: wait %v, want %v", i, at, got, tt.want[i])
				}
			}
		})
	}
}

// TestBroker_RateLimitDelays: a client publishing beyond its rate has its
// publishes delayed, counted, and every one delivered; it stays connected.
func TestBroker_RateLimitDelays(t *testing.T) {
	b := mustStart(t, Options{MaxMessagesPerSecond: 100, MaxMessagesBurst: 10})
	var got atomic.Int64
	b.Subscribe([]string{"#"}, func(string, []byte) error { got.Add(1); return nil })
	c := connect(t, b.URL(), "fast", "", "")
	start := time.Now()
	// All 60 are sent at once, not one per acknowledgement: on a loaded
	// machine the round trips alone would pace them below the rate.
	toks := make([]paho.Token, 60)
	for i := range toks {
		toks[i] = c.Publish("t", 1, false, "x")
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
	}
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Errorf("60 publishes at 100/s with a burst of 10 took %v", took)
	}
	if got.Load() != 60 || b.Throttled() < 45 || !c.IsConnected() {
		t.Errorf("delivered %d, throttled %d, connected %v", got.Load(), b.Throttled(), c.IsConnected())
	}
}
