package upload

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// limiter paces transfers to a byte rate shared by all its users. It keeps
// the virtual time at which the bytes granted so far will have passed at the
// rate; a caller waits until its bytes fit. Idle time earns at most burst of
// credit, so a pause does not allow a spike.
type limiter struct {
	bytesPerSec float64
	burst       time.Duration

	mu   sync.Mutex
	next time.Time

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// newLimiter returns a limiter for bytesPerSec, or nil (no limit) for 0.
func newLimiter(bytesPerSec int64) *limiter {
	if bytesPerSec <= 0 {
		return nil
	}
	return &limiter{bytesPerSec: float64(bytesPerSec), burst: 100 * time.Millisecond, now: time.Now, sleep: sleepCtx}
}

// wait blocks until n more bytes fit in the rate, or ctx ends. A nil limiter
// never waits.
func (l *limiter) wait(ctx context.Context, n int) error {
	if l == nil || n <= 0 {
		return nil
	}
	l.mu.Lock()
	now := l.now()
	if earliest := now.Add(-l.burst); l.next.Before(earliest) {
		l.next = earliest
	}
	l.next = l.next.Add(time.Duration(float64(n) / l.bytesPerSec * float64(time.Second)))
	d := l.next.Sub(now)
	l.mu.Unlock()
	if d <= 0 {
		return nil
	}
	return l.sleep(ctx, d)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pacedReader reads from r at most limitChunk bytes at a time (when limited),
// waits for the limiter after each read and adds what it read to count.
// count is atomic: the HTTP transport may still read a request body after
// the request returned.
type pacedReader struct {
	ctx   context.Context
	r     io.Reader
	l     *limiter
	count *atomic.Int64
}

const limitChunk = 32 << 10

func (p *pacedReader) Read(b []byte) (int, error) {
	if p.l != nil && len(b) > limitChunk {
		b = b[:limitChunk]
	}
	n, err := p.r.Read(b)
	p.count.Add(int64(n))
	if werr := p.l.wait(p.ctx, n); werr != nil && err == nil {
		err = werr
	}
	return n, err
}

// seekablePacedReader is a pacedReader of a request body, which minio-go
// rewinds (Seek) to retry. It has no ReadAt on purpose: minio-go would
// read through ReadAt and bypass the pacing.
type seekablePacedReader struct {
	pacedReader
	s io.Seeker
}

func (p *seekablePacedReader) Seek(offset int64, whence int) (int64, error) {
	return p.s.Seek(offset, whence)
}
