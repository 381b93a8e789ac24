package control

import (
	"fmt"

	"github.com/eddy-edge/eddy/operators/jsontext"
)

// Snapshot returns the state as canonical JSON (see canonical.go): one
// object, keys in byte order, no spaces. Equal states give equal bytes,
// so a checkpoint's content hash does not depend on map order. An empty
// state is {}. The result is a new slice the caller owns.
func (s *State) Snapshot() []byte {
	return s.root.appendJSON(nil)
}

// Restore replaces the state with data, a document written by Snapshot
// (any JSON object is accepted; null members are dropped, as Apply drops
// them). It is all or nothing: on error s is unchanged, and the error
// wraps ErrMalformed or ErrLimit (the snapshot is bigger than s's
// Limits). Version increases, as on Apply.
func (s *State) Restore(data []byte) error {
	p, err := parsePatch(data)
	if err != nil {
		return fmt.Errorf("control: restore: %w", err)
	}
	fresh := NewWithLimits(s.limits)
	if err := fresh.applyPatch(p); err != nil {
		return fmt.Errorf("control: restore: %w", err)
	}
	s.root, s.keys, s.bytes = fresh.root, fresh.keys, fresh.bytes
	s.changed()
	return nil
}

// appendJSON appends e in canonical form.
func (e *entry) appendJSON(dst []byte) []byte {
	if e.members == nil {
		return appendLeaf(dst, e)
	}
	dst = append(dst, '{')
	for i, k := range sortedKeys(e.members) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(jsontext.AppendString(dst, k), ':')
		dst = e.members[k].appendJSON(dst)
	}
	return append(dst, '}')
}
