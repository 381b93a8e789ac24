package state

import (
	"encoding/binary"
	"fmt"
)

// Operator (non-keyed) state: one list per subtask, for sources and sinks
// (an ingest-log position, pending transactions). Its bucket is unkeyed, so
// every subtask keeps all of it on a key-group-filtered Restore; the keys
// carry the writer, so the lists of all old subtasks can be restored into
// one backend without colliding:
//
//	key   = parallelism:u16be subtask:u16be   (of the subtask that wrote it)
//	value = 0x01 (len:uvarint element)*       (the plain list layout of ttl.go)
//
// Which elements a subtask keeps is Flink's redistribution question: with a
// changed parallelism there is no key to route by. Flink offers even-split
// (getListState: the concatenated lists are cut into contiguous, equal
// shares) and union (getUnionListState: every subtask gets everything and
// picks its share itself). Both are here (Redistribution). The restorer
// must give every new subtask the operator-state entries of every old one.

// Redistribution says how the elements of an operator list state are
// shared among the subtasks after a restore. The zero value is invalid.
type Redistribution uint8

const (
	// SplitRedistribution: with the parallelism unchanged, each subtask gets
	// back its own list; with another parallelism, the lists of the old
	// subtasks are concatenated in subtask order and subtask i of n gets the
	// contiguous i-th of n equal shares. Every element goes to exactly one
	// subtask.
	SplitRedistribution Redistribution = iota + 1
	// UnionRedistribution: every subtask gets the elements of all old
	// subtasks, in subtask order, and must Update its list to what it keeps
	// (else the next checkpoint holds the union n times).
	UnionRedistribution
)

// OperatorListOptions place an operator list state in its operator.
type OperatorListOptions struct {
	// Subtask is this subtask's index, 0 ≤ Subtask < Parallelism.
	Subtask, Parallelism int
	// Redistribution is required.
	Redistribution Redistribution
}

// OperatorListState is a list of values owned by one operator subtask,
// kept across checkpoints and redistributed on restore (Flink's operator
// ListState). Its list is one stored value: Add copies it.
//
// It belongs to the goroutine that owns the Backend. After a Restore it
// takes its share (see Redistribution) on the next call, rewriting the
// entries under its own key.
type OperatorListState[T any] struct {
	be    Backend
	name  string
	b     Bucket
	codec Codec[T]
	opts  OperatorListOptions
	own   [4]byte
	gen   uint64
	fresh bool // no Restore since the share was taken

	buf, elem []byte
	arena     []byte
	ents      []opEntry
}

type opEntry struct {
	parallelism, subtask uint16
	at, end              int // the stored value in arena
}

// NewOperatorListState registers the operator list state name of operator
// in be.
func NewOperatorListState[T any](be Backend, operator, name string, codec Codec[T], opts OperatorListOptions) (*OperatorListState[T], error) {
	full := operator + "/" + name
	if operator == "" || name == "" {
		return nil, fmt.Errorf("state: operator state %q: empty operator or state name", full)
	}
	if opts.Parallelism < 1 || opts.Parallelism > 1<<15 || opts.Subtask < 0 || opts.Subtask >= opts.Parallelism {
		return nil, fmt.Errorf("state: %s: subtask %d of parallelism %d", full, opts.Subtask, opts.Parallelism)
	}
	if opts.Redistribution != SplitRedistribution && opts.Redistribution != UnionRedistribution {
		return nil, fmt.Errorf("state: %s: redistribution %d: want SplitRedistribution or UnionRedistribution", full, opts.Redistribution)
	}
	b, err := be.Bucket(full, nil)
	if err != nil {
		return nil, fmt.Errorf("state: %s: %w", full, err)
	}
	s := &OperatorListState[T]{be: be, name: full, b: b, codec: codec, opts: opts}
	binary.BigEndian.PutUint16(s.own[:], uint16(opts.Parallelism))
	binary.BigEndian.PutUint16(s.own[2:], uint16(opts.Subtask))
	return s, nil
}

// Get appends this subtask's elements to dst and returns it.
func (s *OperatorListState[T]) Get(dst []T) ([]T, error) {
	if err := s.takeShare(); err != nil {
		return dst, err
	}
	v, ok, err := s.be.Get(s.b, s.own[:])
	if err != nil || !ok {
		return dst, err
	}
	n0 := len(dst)
	if _, err := listTag(v); err != nil {
		return dst, fmt.Errorf("state: %s: %w", s.name, err)
	}
	for rest := v[1:]; len(rest) > 0; {
		var elem []byte
		if _, elem, rest, err = nextElement(rest, false); err != nil {
			return dst[:n0], fmt.Errorf("state: %s: %w", s.name, err)
		}
		x, err := s.codec.Decode(elem)
		if err != nil {
			return dst[:n0], fmt.Errorf("state: %s: %w: %w", s.name, ErrCorrupt, err)
		}
		dst = append(dst, x)
	}
	return dst, nil
}

// Add appends v to this subtask's list.
func (s *OperatorListState[T]) Add(v T) error {
	if err := s.takeShare(); err != nil {
		return err
	}
	buf := append(s.buf[:0], tagPlain)
	old, ok, err := s.be.Get(s.b, s.own[:])
	if err != nil {
		return err
	}
	if ok {
		if _, err := listTag(old); err != nil {
			return fmt.Errorf("state: %s: %w", s.name, err)
		}
		buf = append(buf, old[1:]...)
	}
	s.elem = s.codec.Append(s.elem[:0], v)
	s.buf = appendElement(buf, false, 0, s.elem)
	return s.be.Put(s.b, s.own[:], s.buf)
}

// Update replaces this subtask's list with vs (empty clears it).
func (s *OperatorListState[T]) Update(vs []T) error {
	if err := s.takeShare(); err != nil {
		return err
	}
	if len(vs) == 0 {
		return s.be.Delete(s.b, s.own[:])
	}
	buf := append(s.buf[:0], tagPlain)
	for _, v := range vs {
		s.elem = s.codec.Append(s.elem[:0], v)
		buf = appendElement(buf, false, 0, s.elem)
	}
	s.buf = buf
	return s.be.Put(s.b, s.own[:], buf)
}

// Clear empties this subtask's list.
func (s *OperatorListState[T]) Clear() error { return s.Update(nil) }

// takeShare runs once after creation and after each Restore: it reads every
// entry of the bucket, keeps this subtask's share of the elements under its
// own key and deletes the others, so that its snapshots hold only its share.
func (s *OperatorListState[T]) takeShare() error {
	if s.fresh && s.gen == s.be.Generation() {
		return nil
	}
	s.arena, s.ents = s.arena[:0], s.ents[:0]
	var bad error
	err := s.be.Scan(s.b, nil, func(k, v []byte) bool {
		if len(k) != 4 {
			bad = fmt.Errorf("%w: operator state key %x", ErrCorrupt, k)
			return false
		}
		if bad = checkPlainList(v); bad != nil {
			return false
		}
		e := opEntry{parallelism: binary.BigEndian.Uint16(k), subtask: binary.BigEndian.Uint16(k[2:]), at: len(s.arena)}
		s.arena = append(s.arena, v...)
		e.end = len(s.arena)
		s.ents = append(s.ents, e)
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("state: %s: take share: %w", s.name, err)
	}
	own := s.ownShare()
	buf := append(s.buf[:0], tagPlain)
	for _, sl := range own {
		buf = append(buf, sl...)
	}
	s.buf = buf
	var key [4]byte
	for _, e := range s.ents {
		binary.BigEndian.PutUint16(key[:], e.parallelism)
		binary.BigEndian.PutUint16(key[2:], e.subtask)
		if key != s.own {
			if err := s.be.Delete(s.b, key[:]); err != nil {
				return err
			}
		}
	}
	if len(buf) == 1 {
		err = s.be.Delete(s.b, s.own[:])
	} else {
		err = s.be.Put(s.b, s.own[:], buf)
	}
	if err != nil {
		return err
	}
	s.fresh, s.gen = true, s.be.Generation()
	return nil
}

// ownShare returns the encoded elements (without tags) this subtask keeps,
// as slices of the arena, in order. Entries are in key order: by writer
// parallelism, then subtask.
func (s *OperatorListState[T]) ownShare() [][]byte {
	var out [][]byte
	if s.opts.Redistribution == UnionRedistribution {
		for _, e := range s.ents {
			out = append(out, s.elements(e))
		}
		return out
	}
	for i := 0; i < len(s.ents); {
		j := i
		for j < len(s.ents) && s.ents[j].parallelism == s.ents[i].parallelism {
			j++
		}
		group := s.ents[i:j]
		i = j
		if int(group[0].parallelism) == s.opts.Parallelism {
			for _, e := range group {
				if int(e.subtask) == s.opts.Subtask {
					out = append(out, s.elements(e))
				}
			}
			continue
		}
		// Another parallelism: the contiguous share of the concatenation.
		total := 0
		for _, e := range group {
			total += s.count(e)
		}
		lo := s.opts.Subtask * total / s.opts.Parallelism
		hi := (s.opts.Subtask + 1) * total / s.opts.Parallelism
		idx := 0
		for _, e := range group {
			for rest := s.elements(e); len(rest) > 0; {
				_, _, r, _ := nextElement(rest, false) // checked by takeShare
				if idx >= lo && idx < hi {
					out = append(out, rest[:len(rest)-len(r)])
				}
				idx++
				rest = r
			}
		}
	}
	return out
}

// elements returns the elements of entry e, without the tag.
func (s *OperatorListState[T]) elements(e opEntry) []byte { return s.arena[e.at+1 : e.end] }

func (s *OperatorListState[T]) count(e opEntry) int {
	n := 0
	for rest := s.elements(e); len(rest) > 0; n++ {
		_, _, rest, _ = nextElement(rest, false) // checked by takeShare
	}
	return n
}

// checkPlainList returns an error unless v is a well-formed plain list.
func checkPlainList(v []byte) error {
	stamped, err := listTag(v)
	if err != nil {
		return err
	}
	if stamped {
		return fmt.Errorf("%w: stamped operator list", ErrCorrupt)
	}
	for rest := v[1:]; len(rest) > 0; {
		if _, _, rest, err = nextElement(rest, false); err != nil {
			return err
		}
	}
	return nil
}
