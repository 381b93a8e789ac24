package sink

import (
	"bytes"
	"sync"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// copyingStore is paho's in-memory message store, except that it keeps each
// packet serialized and hands out a fresh copy on Get.
//
// paho's MemoryStore returns the very packet it was given. On reconnect,
// paho's resume sets DUP on stored PUBLISH packets while a packet published
// just after the OnConnect callback can still be in the outgoing queue under
// the same pointer: a data race (paho issues 657 and 703). With copies,
// resume only ever touches its own packet. The cost is one serialized copy
// per unacknowledged QoS 1 message.
//
// It also tells when a publish is acknowledged: paho deletes "o.<id>" when
// the PUBACK arrives, whereas it completes a token early when it re-queues
// the message after a reconnect (claimID), so a token alone does not prove
// delivery. waitGone waits for the deletions.
type copyingStore struct {
	mu      sync.Mutex
	packets map[string][]byte
	changed chan struct{} // closed and replaced on every deletion
}

func newCopyingStore() *copyingStore {
	return &copyingStore{packets: map[string][]byte{}, changed: make(chan struct{})}
}

// waitGone reports whether all keys are absent from the store, waiting for
// deletions until deadline fires.
func (s *copyingStore) waitGone(keys []string, deadline <-chan time.Time) bool {
	for {
		s.mu.Lock()
		pending := false
		for _, k := range keys {
			if _, ok := s.packets[k]; ok {
				pending = true
				break
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if !pending {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

// notifyLocked wakes waitGone; s.mu must be held.
func (s *copyingStore) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *copyingStore) Open() {}

func (s *copyingStore) Close() {}

// Put serializes message. paho calls it before handing the packet to its
// writer goroutine, so reading the packet here does not race.
func (s *copyingStore) Put(key string, message packets.ControlPacket) {
	var buf bytes.Buffer
	if err := message.Write(&buf); err != nil {
		// Writing to a bytes.Buffer cannot fail; a packet that cannot be
		// encoded would fail on the wire too.
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.packets[key] = buf.Bytes()
}

func (s *copyingStore) Get(key string) packets.ControlPacket {
	s.mu.Lock()
	b, ok := s.packets[key]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	p, err := packets.ReadPacket(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	return p
}

func (s *copyingStore) All() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.packets))
	for k := range s.packets {
		keys = append(keys, k)
	}
	return keys
}

func (s *copyingStore) Del(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.packets, key)
	s.notifyLocked()
}

func (s *copyingStore) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.packets)
	s.notifyLocked()
}
