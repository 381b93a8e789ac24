package stages

import (
	"sync"
)

// lockedRateLimiter is a rateLimiter shared by goroutines (the subtasks).
type lockedRateLimiter struct {
	mu sync.Mutex
	r  rateLimiter
}

func (l *lockedRateLimiter) allow(nowMs int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.allow(nowMs)
}

// rateLimiter lets a few log lines per minute through.
type rateLimiter struct {
	windowStart int64
	n           int
}

func (r *rateLimiter) allow(nowMs int64) bool {
	const perMinute = 5
	if nowMs-r.windowStart >= 60_000 {
		r.windowStart, r.n = nowMs, 0
	}
	r.n++
	return r.n <= perMinute
}
