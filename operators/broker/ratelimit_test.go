package broker

import (
	"testing"
	"time"
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
