package broker

import (
	"sync"
	"sync/atomic"
)

// SubscriberFunc receives one published message. topic and payload belong to
// the broker and are valid only until the function returns: copy what must
// be kept. Returning an error rejects the publish (see the package doc).
type SubscriberFunc func(topic string, payload []byte) error

// DeferredFunc receives one publish whose acknowledgement it decides later
// (see Broker.SubscribeDeferred). payload is a copy it may keep. dup is the
// MQTT DUP flag. It must call done.Done exactly once, from any goroutine:
// nil acknowledges the publish and routes it on; an error rejects it as a
// SubscriberFunc's error does. It may block before returning, which stalls
// the publishing sensor's connection: that is its backpressure.
type DeferredFunc func(topic string, payload []byte, dup bool, done Completion)

// Completion ends a deferred publish: see DeferredFunc.
type Completion interface{ Done(err error) }

// waitCompletion is the Completion of a publish the hook waits for.
type waitCompletion chan error

func (c waitCompletion) Done(err error) { c <- err }

type subscriber struct {
	id       uint64
	filters  []string
	fn       SubscriberFunc
	deferred DeferredFunc // set instead of fn by SubscribeDeferred
}

// subscribers is a copy-on-write list: the publish hook reads it without a
// lock on every message, Subscribe and unsubscribe replace it.
type subscribers struct {
	mu     sync.Mutex // serializes writers
	nextID uint64
	list   atomic.Pointer[[]subscriber]
}

func (s *subscribers) add(filters []string, fn SubscriberFunc, deferred DeferredFunc) (id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	var cur []subscriber
	if p := s.list.Load(); p != nil {
		cur = *p
	}
	next := make([]subscriber, 0, len(cur)+1)
	next = append(next, cur...)
	next = append(next, subscriber{id: s.nextID, filters: append([]string(nil), filters...), fn: fn, deferred: deferred})
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

// matches reports whether any of sub's filters matches topic.
func (sub *subscriber) matches(topic string) bool {
	for _, f := range sub.filters {
		if matchFilter(f, topic) {
			return true
		}
	}
	return false
}

// only returns the one subscriber whose filters match topic, or nil when
// none or several match.
func (s *subscribers) only(topic string) *subscriber {
	p := s.list.Load()
	if p == nil {
		return nil
	}
	var found *subscriber
	for i := range *p {
		sub := &(*p)[i]
		if sub.matches(topic) {
			if found != nil {
				return nil
			}
			found = sub
		}
	}
	return found
}

// deliver calls every subscriber whose filters match topic, in subscription
// order, and returns the first error; subscribers after a failing one are
// not called. A deferred subscriber is called with a copy of payload and
// waited for.
func (s *subscribers) deliver(topic string, payload []byte, dup bool) error {
	p := s.list.Load()
	if p == nil {
		return nil
	}
	for i := range *p {
		sub := &(*p)[i]
		if !sub.matches(topic) {
			continue // one call per subscriber even if several filters match
		}
		var err error
		if sub.deferred != nil {
			c := make(waitCompletion, 1)
			sub.deferred(topic, append([]byte(nil), payload...), dup, c)
			err = <-c
		} else {
			err = sub.fn(topic, payload)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
