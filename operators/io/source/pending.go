package source

import (
	"context"
	"sync"
)

// pending is the queue between a receiving callback (paho's message handler,
// a shared subscription's handlers), which must return quickly, and Run's
// delivery loop, which may block on a full out channel. push never blocks.
// Safe for concurrent use.
type pending struct {
	mu    sync.Mutex
	msgs  []Message // msgs[head:] are queued
	head  int
	seq   uint64        // Offset of the last message queued
	ready chan struct{} // capacity 1: a token means "maybe not empty"
}

func newPending() *pending {
	return &pending{ready: make(chan struct{}, 1)}
}

// len returns the number of queued messages.
func (p *pending) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs) - p.head
}

// push queues m, assigning its Offset, unless limit > 0 and limit messages
// are queued already; it reports whether m was queued.
func (p *pending) push(m Message, limit int) bool {
	if !p.pushQuiet(&m, limit) {
		return false
	}
	p.signal()
	return true
}

// pushQuiet is push without waking deliver: the caller calls signal once
// for everything it pushed.
func (p *pending) pushQuiet(m *Message, limit int) bool {
	p.mu.Lock()
	if limit > 0 && len(p.msgs)-p.head >= limit {
		p.mu.Unlock()
		return false
	}
	p.appendLocked(*m)
	p.mu.Unlock()
	return true
}

func (p *pending) appendLocked(m Message) {
	p.seq++
	m.Offset = p.seq
	p.msgs = append(p.msgs, m)
}

func (p *pending) signal() {
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// take removes up to max queued messages and returns them in a new slice, or
// nil when none are queued.
func (p *pending) take(max int) []Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(p.msgs)-p.head, max)
	if n == 0 {
		return nil
	}
	batch := make([]Message, n)
	copy(batch, p.msgs[p.head:p.head+n])
	clear(p.msgs[p.head : p.head+n]) // drop references for the GC
	p.head += n
	switch {
	case p.head == len(p.msgs):
		p.msgs, p.head = p.msgs[:0], 0
	case p.head > len(p.msgs)/2:
		// Compact so a long queue does not grow without bound at the front.
		rest := copy(p.msgs, p.msgs[p.head:])
		clear(p.msgs[rest:])
		p.msgs, p.head = p.msgs[:rest], 0
	}
	return batch
}

// deliver sends queued messages to out in batches of at most MaxBatch, in
// queue order, until ctx is cancelled. A batch holds whatever is queued when
// the previous one was accepted: batching grows under load and costs no
// latency when idle. A batch taken but not accepted before ctx ends goes
// back to the front of the queue.
func (p *pending) deliver(ctx context.Context, out chan<- []Message) {
	for {
		batch := p.take(MaxBatch)
		if batch == nil {
			select {
			case <-p.ready:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- batch:
		case <-ctx.Done():
			p.requeue(batch)
			return
		}
	}
}

// requeue puts a batch that could not be delivered back at the front of the
// queue, so a later Run delivers it first.
func (p *pending) requeue(batch []Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(batch, p.msgs[p.head:]...)
	p.head = 0
}
