package broker

import (
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// tokenBucket is one client's publish budget: rate tokens a second, up to
// burst held. It is pure (time comes in as an argument) and not safe for
// concurrent use: only its client's read loop takes from it.
type tokenBucket struct {
	rate, burst float64
	tokens      float64
	last        time.Duration // of the previous take; 0 before the first
	warned      bool          // the client's first wait was logged
	timer       *time.Timer   // for its waits, made at the first
}

// take takes one token at now (a monotonic clock) and returns how long the
// caller must wait before it is its own: 0 when one was there. A token not
// there is borrowed (the balance goes negative), so the next take waits
// for it to be paid back as well: the long-run rate never exceeds rate.
func (b *tokenBucket) take(now time.Duration) time.Duration {
	if b.last == 0 {
		b.tokens = b.burst
	} else {
		b.tokens = min(b.burst, b.tokens+(now-b.last).Seconds()*b.rate)
	}
	b.last = now
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// rateLimits holds each connected client's bucket.
type rateLimits struct {
	rate, burst float64
	start       time.Time // origin of the buckets' monotonic clock
	mu          sync.Mutex
	buckets     map[*mqtt.Client]*tokenBucket
}

func newRateLimits(perSecond, burst int) *rateLimits {
	return &rateLimits{rate: float64(perSecond), burst: float64(burst), start: time.Now(),
		buckets: map[*mqtt.Client]*tokenBucket{}}
}

// delay takes a token of cl's bucket now and returns the bucket, the wait
// before its publish may be taken, and whether this is the connection's
// first wait.
func (r *rateLimits) delay(cl *mqtt.Client) (b *tokenBucket, wait time.Duration, first bool) {
	r.mu.Lock()
	b = r.buckets[cl]
	if b == nil {
		b = &tokenBucket{rate: r.rate, burst: r.burst}
		r.buckets[cl] = b
	}
	r.mu.Unlock()
	wait = b.take(time.Since(r.start) + 1) // +1: never 0, which means "no take yet"
	first = wait > 0 && !b.warned
	b.warned = b.warned || first
	return b, wait, first
}

// sleep blocks for d, or until stop is closed, on the bucket's own timer.
func (b *tokenBucket) sleep(d time.Duration, stop <-chan struct{}) {
	if b.timer == nil {
		b.timer = time.NewTimer(d)
	} else {
		b.timer.Reset(d)
	}
	select {
	case <-b.timer.C:
	case <-stop:
		b.timer.Stop()
	}
}

// forget drops cl's bucket (it disconnected).
func (r *rateLimits) forget(cl *mqtt.Client) {
	r.mu.Lock()
	delete(r.buckets, cl)
	r.mu.Unlock()
}
