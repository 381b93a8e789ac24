package broker

import (
	"sync"
	"sync/atomic"
)

// SubscriberFunc receives one published message. topic and payload belong to
// the broker and are valid only until the function returns: copy what must
// be kept. Returning an error rejects the publish (see the package doc).
type SubscriberFunc func(topic string, payload []byte) error

type subscriber struct {
	id      uint64
	filters []string
	fn      SubscriberFunc
}

// subscribers is a copy-on-write list: the publish hook reads it without a
// lock on every message, Subscribe and unsubscribe replace it.
type subscribers struct {
	mu     sync.Mutex // serializes writers
	nextID uint64
	list   atomic.Pointer[[]subscriber]
}

func (s *subscribers) add(filters []string, fn SubscriberFunc) (id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	var cur []subscriber
	if p := s.list.Load(); p != nil {
		cur = *p
	}
	next := make([]subscriber, 0, len(cur)+1)
	next = append(next, cur...)
	next = append(next, subscriber{id: s.nextID, filters: append([]string(nil), filters...), fn: fn})
	s.list.Store(&next)
	return s.nextID
}

func (s *subscribers) remove(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.list.Load()
	if p == nil {
		return
	}
	next := make([]subscriber, 0, len(*p))
	for _, sub := range *p {
		if sub.id != id {
			next = append(next, sub)
		}
	}
	s.list.Store(&next)
}

// deliver calls every subscriber whose filters match topic, in subscription
// order, and returns the first error; subscribers after a failing one are
// not called.
func (s *subscribers) deliver(topic string, payload []byte) error {
	p := s.list.Load()
	if p == nil {
		return nil
	}
	for i := range *p {
		sub := &(*p)[i]
		for _, f := range sub.filters {
			if matchFilter(f, topic) {
				if err := sub.fn(topic, payload); err != nil {
					return err
				}
				break // one call per subscriber even if several filters match
			}
		}
	}
	return nil
}
