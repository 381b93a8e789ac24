package control

import (
	"fmt"

	"github.com/eddy-edge/eddy/operators/event"
)

// State is the control state of one pipeline: a JSON document built by
// merging control messages. See the package documentation for the
// semantics.
//
// A State is not safe for concurrent use, not even for concurrent reads
// (reading an object caches its text): one goroutine, the pipeline's
// prepare stage, calls Apply, Restore, Snapshot and every lookup.
type State struct {
	root    *entry
	limits  Limits
	keys    int
	bytes   int
	version uint64
	// cached lists the objects whose text Node.Value has cached; the
	// next change drops the texts.
	cached []*entry
}

// entry is one node of the document: an object or a leaf.
type entry struct {
	// members is non-nil for an object.
	members map[string]*entry
	// value is a leaf's value; String leaves of arrays hold the array's
	// canonical text. For an object it holds the cached text once
	// Node.Value has built it, else Kind Missing.
	value event.Value
	array bool // a leaf holding an array's text
}

func newObject() *entry { return &entry{members: map[string]*entry{}} }

// New returns an empty State with the default Limits.
func New() *State { return NewWithLimits(Limits{}) }

// NewWithLimits returns an empty State bounded by l (zero fields take
// their defaults).
func NewWithLimits(l Limits) *State {
	return &State{root: newObject(), limits: l.withDefaults()}
}

// Version counts the changes to s: every successful Apply and Restore
// increments it, failed ones leave it as it was. Values and Nodes read
// before a change must be read again after it to see the change.
func (s *State) Version() uint64 { return s.version }

// Keys returns the number of keys in s, counted as Limits.MaxKeys counts.
func (s *State) Keys() int { return s.keys }

// Bytes returns the bytes s holds, counted as Limits.MaxBytes counts.
func (s *State) Bytes() int { return s.bytes }

// Limits returns the limits of s, with defaults filled in.
func (s *State) Limits() Limits { return s.limits }

// Apply merges one control message, a JSON object, into s (JSON Merge
// Patch, RFC 7386): an object merges into an object key by key, null
// deletes the key, and anything else (a number, string, bool, array, or
// an object where there was a leaf) replaces what was there.
//
// Apply is all or nothing: on error s is unchanged. It returns an error
// wrapping ErrMalformed when payload is not one JSON object (or nests
// deeper than MaxDepth, or holds a number beyond float64), and one
// wrapping ErrLimit when the result would exceed s's Limits; the agent
// dead-letters the message in both cases. Applying the same message twice
// gives the same state as applying it once, so replaying control messages
// after a restore is safe.
//
// Apply parses with encoding/json and allocates; it is meant for control
// streams of at most a few messages per second, not for readings.
func (s *State) Apply(payload []byte) error {
	p, err := parsePatch(payload)
	if err != nil {
		return err
	}
	return s.applyPatch(p)
}

func (s *State) applyPatch(p *patch) error {
	keys, bytes := s.merge(s.root, p, false)
	if n := s.keys + keys; n > s.limits.MaxKeys {
		return fmt.Errorf("%w: the message would make %d keys, over the limit of %d", ErrLimit, n, s.limits.MaxKeys)
	}
	if n := s.bytes + bytes; n > s.limits.MaxBytes {
		return fmt.Errorf("%w: the message would make %d bytes, over the limit of %d", ErrLimit, n, s.limits.MaxBytes)
	}
	s.merge(s.root, p, true)
	s.keys += keys
	s.bytes += bytes
	s.changed()
	return nil
}

// merge merges the members of p into the object t and returns the change
// in key count and bytes. With apply false it changes nothing and only
// computes them (t may then be nil: an object the merge would create).
// Both passes walk the same way, so the check before a change sees
// exactly what the change will do.
func (s *State) merge(t *entry, p *patch, apply bool) (keys, bytes int) {
	for k, q := range p.members {
		var old *entry
		if t != nil {
			old = t.members[k]
		}
		if q.members == nil && q.value.Kind == event.Null {
			if old != nil {
				ok, ob := old.size()
				keys -= 1 + ok
				bytes -= len(k) + ob
				if apply {
					delete(t.members, k)
				}
			}
			continue
		}
		if old == nil {
			keys++
			bytes += len(k)
		}
		if q.members != nil && old != nil && old.members != nil {
			dk, db := s.merge(old, q, apply)
			keys += dk
			bytes += db
			continue
		}
		if old != nil {
			ok, ob := old.size()
			keys -= ok
			bytes -= ob
		}
		if q.members != nil {
			// A new object, or one replacing a leaf: merge into {}.
			var child *entry
			if apply {
				child = newObject()
				t.members[k] = child
			}
			dk, db := s.merge(child, q, apply)
			keys += dk
			bytes += db
			continue
		}
		bytes += len(q.value.Str)
		if apply {
			t.members[k] = &entry{value: q.value, array: q.array}
		}
	}
	return keys, bytes
}

// size returns the keys and bytes below e, not counting e's own key.
func (e *entry) size() (keys, bytes int) {
	if e.members == nil {
		return 0, len(e.value.Str)
	}
	for k, m := range e.members {
		mk, mb := m.size()
		keys += 1 + mk
		bytes += len(k) + mb
	}
	return keys, bytes
}

// changed records a change: a new version, and cached object texts
// dropped (not overwritten, so Values read earlier keep their bytes).
func (s *State) changed() {
	s.version++
	for _, e := range s.cached {
		e.value = event.Value{}
	}
	clear(s.cached)
	s.cached = s.cached[:0]
}
