package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Keyed state key layout, in one bucket per state named "operator/state":
//
//	value, list, reducing, aggregating = keyGroup:u16be keyLen:uvarint key nsLen:uvarint namespace
//	map entry                          = keyGroup:u16be keyLen:uvarint key nsLen:uvarint namespace userKey
//
// The key group leads, so one key group's entries are one contiguous range
// and a restore with another parallelism keeps whole key groups (the buckets
// are registered with KeyGroupPrefix). The lengths make the layout prefix
// free: the entries of one map are exactly those starting with its
// (key, namespace) prefix. Values are wrapped in the envelope of ttl.go.

// KeyedOptions configure a KeyedContext.
type KeyedOptions struct {
	// Now returns the current time in milliseconds since the Unix epoch. It
	// is read only by states with a TTLConfig, and required by them (tests
	// pass a fake clock).
	Now func() int64
}

// KeyedContext is the current key and namespace shared by the keyed states
// of one operator subtask, as Flink's keyed state backend holds them: set
// the key (and the namespace, e.g. the window) once per reading, then read
// and write any of the states. States are created with NewValueState,
// NewListState, NewMapState, NewReducingState and NewAggregatingState.
//
// A KeyedContext and its states belong to the goroutine that owns the
// Backend. Using a state before SetCurrentKey is a bug and panics.
type KeyedContext struct {
	be       Backend
	operator string
	now      func() int64

	key    []byte // keyGroup | keyLen | key | nsLen | namespace
	keyAt  int    // start of the key bytes
	keyEnd int    // end of the key bytes
	hasKey bool
	ns     []byte // the current namespace

	names      map[string]struct{}
	ttlStates  []*stateInfo
	cleanNext  int
	cleanArena []byte
	cleanOps   []cleanOp

	read []byte // a value read and refreshed (OnReadAndWrite), or kept past a Delete
}

// stateInfo describes one registered state.
type stateInfo struct {
	name   string // the bucket's name, operator/state
	bucket Bucket
	ttl    ttlPolicy
	list   bool   // list value layout (per-element stamps)
	cursor []byte // where Cleanup resumes
}

// NewKeyedContext returns the context of the keyed states of operator (a
// name unique within be, the prefix of its states' bucket names) on be.
func NewKeyedContext(be Backend, operator string, opts KeyedOptions) (*KeyedContext, error) {
	if operator == "" {
		return nil, fmt.Errorf("state: keyed context: empty operator name")
	}
	return &KeyedContext{be: be, operator: operator, now: opts.Now, names: make(map[string]struct{})}, nil
}

// SetCurrentKey makes key, of key group keyGroup (KeyGroup(key,
// maxKeyGroups)), the key the states read and write; the namespace is kept.
// key is copied. It does not allocate once the context's buffer fits the
// longest key and namespace.
func (kc *KeyedContext) SetCurrentKey(keyGroup uint16, key []byte) {
	b := binary.BigEndian.AppendUint16(kc.key[:0], keyGroup)
	b = binary.AppendUvarint(b, uint64(len(key)))
	kc.keyAt = len(b)
	b = append(b, key...)
	kc.keyEnd = len(b)
	kc.key = b
	kc.hasKey = true
	kc.appendNamespace()
}

// SetNamespace makes ns the namespace (e.g. the encoded window) the states
// read and write; nil or empty is the default namespace (Flink's
// VoidNamespace). ns is copied.
func (kc *KeyedContext) SetNamespace(ns []byte) {
	kc.ns = append(kc.ns[:0], ns...)
	if kc.hasKey {
		kc.appendNamespace()
	}
}

func (kc *KeyedContext) appendNamespace() {
	b := binary.AppendUvarint(kc.key[:kc.keyEnd], uint64(len(kc.ns)))
	kc.key = append(b, kc.ns...)
}

// CurrentKey returns the current key group and key (nil before
// SetCurrentKey). The key is valid until the next SetCurrentKey.
func (kc *KeyedContext) CurrentKey() (keyGroup uint16, key []byte) {
	if !kc.hasKey {
		return 0, nil
	}
	return binary.BigEndian.Uint16(kc.key), kc.key[kc.keyAt:kc.keyEnd]
}

// Namespace returns the current namespace, valid until the next
// SetNamespace.
func (kc *KeyedContext) Namespace() []byte { return kc.ns }

// stateKey returns the storage key of the current (key, namespace).
func (kc *KeyedContext) stateKey() []byte {
	if !kc.hasKey {
		panic("state: keyed state used before KeyedContext.SetCurrentKey")
	}
	return kc.key
}

// register creates the bucket of a new state.
func (kc *KeyedContext) register(name string, list bool, ttl TTLConfig) (*stateInfo, error) {
	p, err := ttl.policy()
	if err != nil {
		return nil, fmt.Errorf("state: %s: %w", name, err)
	}
	if p.enabled() && kc.now == nil {
		return nil, fmt.Errorf("state: %s: a TTL needs KeyedOptions.Now", name)
	}
	if name == "" {
		return nil, fmt.Errorf("state: empty state name")
	}
	full := kc.operator + "/" + name
	if _, dup := kc.names[full]; dup {
		return nil, fmt.Errorf("state: %s: registered twice", full)
	}
	b, err := kc.be.Bucket(full, KeyGroupPrefix)
	if err != nil {
		return nil, fmt.Errorf("state: %s: %w", full, err)
	}
	kc.names[full] = struct{}{}
	si := &stateInfo{name: full, bucket: b, ttl: p, list: list}
	if p.enabled() {
		kc.ttlStates = append(kc.ttlStates, si)
	}
	return si, nil
}

// liveValue applies TTL to the stored value v of key k of si and returns
// its payload, or false if there is none to return. An expired value is
// deleted (returned once with ReturnExpiredIfNotCleanedUp); OnReadAndWrite
// restamps a read one. forWrite means the caller is about to overwrite
// the value: expired counts as absent and nothing is written. The payload
// is valid until the next call on the context or Backend.
func (kc *KeyedContext) liveValue(si *stateInfo, k, v []byte, forWrite bool) ([]byte, bool, error) {
	payload, ts, stamped, err := openValue(v)
	if err != nil {
		return nil, false, fmt.Errorf("state: %s: %w", si.name, err)
	}
	if !si.ttl.enabled() || !stamped {
		return payload, true, nil
	}
	now := kc.now()
	if si.ttl.expired(ts, now) {
		if forWrite {
			return nil, false, nil
		}
		if si.ttl.returnOnce {
			kc.read = append(kc.read[:0], payload...)
			payload = kc.read
		}
		if err := kc.be.Delete(si.bucket, k); err != nil {
			return nil, false, err
		}
		return payload, si.ttl.returnOnce, nil
	}
	if si.ttl.onRead && !forWrite && ts != now {
		kc.read = append(kc.read[:0], v...)
		binary.LittleEndian.PutUint64(kc.read[1:], uint64(now))
		if err := kc.be.Put(si.bucket, k, kc.read); err != nil {
			return nil, false, err
		}
		return kc.read[1+stampBytes:], true, nil
	}
	return payload, true, nil
}

// getValue reads key k of si through liveValue.
func (kc *KeyedContext) getValue(si *stateInfo, k []byte, forWrite bool) ([]byte, bool, error) {
	v, ok, err := kc.be.Get(si.bucket, k)
	if err != nil || !ok {
		return nil, false, err
	}
	return kc.liveValue(si, k, v, forWrite)
}

// header starts a value of si in dst.
func (kc *KeyedContext) header(si *stateInfo, dst []byte) []byte {
	if !si.ttl.enabled() {
		return append(dst[:0], tagPlain)
	}
	return appendHeader(dst[:0], true, kc.now())
}

// mergeInto moves the values of the sources namespaces of the current key
// into target, with fold applied at each (read, clear) of a source and then
// at the target's write, restoring the current namespace after.
func (kc *KeyedContext) mergeInto(target []byte, sources [][]byte, read func() error, write func() error) error {
	kc.stateKey()
	saved := append([]byte(nil), kc.Namespace()...)
	defer kc.SetNamespace(saved)
	for _, src := range sources {
		if bytes.Equal(src, target) {
			continue
		}
		kc.SetNamespace(src)
		if err := read(); err != nil {
			return err
		}
	}
	kc.SetNamespace(target)
	return write()
}

// cell is a typed value at one storage key: the core of ValueState,
// ReducingState and AggregatingState.
type cell[T any] struct {
	kc    *KeyedContext
	si    *stateInfo
	codec Codec[T]
	buf   []byte
}

func (c *cell[T]) get(k []byte, forWrite bool) (T, bool, error) {
	var zero T
	p, ok, err := c.kc.getValue(c.si, k, forWrite)
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := c.codec.Decode(p)
	if err != nil {
		return zero, false, fmt.Errorf("state: %s: %w: %w", c.si.name, ErrCorrupt, err)
	}
	return v, true, nil
}

func (c *cell[T]) put(k []byte, v T) error {
	c.buf = c.codec.Append(c.kc.header(c.si, c.buf), v)
	return c.kc.be.Put(c.si.bucket, k, c.buf)
}

func (c *cell[T]) clear(k []byte) error { return c.kc.be.Delete(c.si.bucket, k) }

// ValueState is one value per key and namespace (Flink's ValueState).
type ValueState[T any] struct {
	c cell[T]
}

// NewValueState registers the value state name of kc's operator; ttl's zero
// value means no TTL.
func NewValueState[T any](kc *KeyedContext, name string, codec Codec[T], ttl TTLConfig) (*ValueState[T], error) {
	si, err := kc.register(name, false, ttl)
	if err != nil {
		return nil, err
	}
	return &ValueState[T]{c: cell[T]{kc: kc, si: si, codec: codec}}, nil
}

// Value returns the value of the current key and namespace, or false if
// there is none (or it expired). Fixed-size codecs decode without
// allocating.
func (s *ValueState[T]) Value() (T, bool, error) {
	return s.c.get(s.c.kc.stateKey(), false)
}

// Update sets the value of the current key and namespace.
func (s *ValueState[T]) Update(v T) error { return s.c.put(s.c.kc.stateKey(), v) }

// Clear removes the value of the current key and namespace.
func (s *ValueState[T]) Clear() error { return s.c.clear(s.c.kc.stateKey()) }

// NoExpiry is the write time ValueStamped gives a value that never
// expires: the state has no TTL, or the value was written before TTL was
// enabled (a plain value).
const NoExpiry int64 = math.MaxInt64

// ValueStamped is Value with the value's write time, its TTL stamp
// (NoExpiry if it has none), for a cache of decoded values in front of the
// state: it can expire a cached value exactly when the state would
// (TTLConfig: expired when writeTime + TTL ≤ now) and write it back with
// UpdateStamped without restarting its TTL.
func (s *ValueState[T]) ValueStamped() (T, int64, bool, error) {
	var zero T
	k := s.c.kc.stateKey()
	raw, ok, err := s.c.kc.be.Get(s.c.si.bucket, k)
	if err != nil || !ok {
		return zero, 0, false, err
	}
	_, ts, stamped, err := openValue(raw)
	if err != nil {
		return zero, 0, false, fmt.Errorf("state: %s: %w", s.c.si.name, err)
	}
	switch {
	case !stamped || !s.c.si.ttl.enabled():
		ts = NoExpiry
	case s.c.si.ttl.onRead:
		ts = s.c.kc.now() // the read below restamps it
	}
	v, ok, err := s.c.get(k, false)
	return v, ts, ok, err
}

// UpdateStamped sets the value of the current key and namespace as written
// at writeTime (a time from KeyedOptions.Now, or NoExpiry for a value that
// must not expire): a cache writing back a value later than it was set
// keeps the value's TTL. Without TTL it is Update.
func (s *ValueState[T]) UpdateStamped(v T, writeTime int64) error {
	c := &s.c
	if !c.si.ttl.enabled() || writeTime == NoExpiry {
		c.buf = append(c.buf[:0], tagPlain)
	} else {
		c.buf = appendHeader(c.buf[:0], true, writeTime)
	}
	c.buf = c.codec.Append(c.buf, v)
	return c.kc.be.Put(c.si.bucket, c.kc.stateKey(), c.buf)
}

// ReduceFunc combines two values into one; it must be associative.
type ReduceFunc[T any] func(a, b T) T

// ReducingState keeps the reduction of the values added per key and
// namespace (Flink's ReducingState).
type ReducingState[T any] struct {
	c      cell[T]
	reduce ReduceFunc[T]
	acc    T
	have   bool
}

// NewReducingState registers the reducing state name of kc's operator.
func NewReducingState[T any](kc *KeyedContext, name string, codec Codec[T], reduce ReduceFunc[T], ttl TTLConfig) (*ReducingState[T], error) {
	if reduce == nil {
		return nil, fmt.Errorf("state: %s: nil reduce function", name)
	}
	si, err := kc.register(name, false, ttl)
	if err != nil {
		return nil, err
	}
	return &ReducingState[T]{c: cell[T]{kc: kc, si: si, codec: codec}, reduce: reduce}, nil
}

// Get returns the reduction of the current key and namespace, or false if
// nothing was added (or it expired).
func (s *ReducingState[T]) Get() (T, bool, error) { return s.c.get(s.c.kc.stateKey(), false) }

// Add reduces v into the current key and namespace: reduce(old, v), or v.
func (s *ReducingState[T]) Add(v T) error {
	k := s.c.kc.stateKey()
	old, ok, err := s.c.get(k, true)
	if err != nil {
		return err
	}
	if ok {
		v = s.reduce(old, v)
	}
	return s.c.put(k, v)
}

// Clear removes the reduction of the current key and namespace.
func (s *ReducingState[T]) Clear() error { return s.c.clear(s.c.kc.stateKey()) }

// MergeNamespaces reduces the values of the sources namespaces of the
// current key into target's and clears the sources (session window
// merging). The current namespace is kept.
func (s *ReducingState[T]) MergeNamespaces(target []byte, sources ...[]byte) error {
	var zero T
	s.acc, s.have = zero, false
	fold := func() error {
		k := s.c.kc.stateKey()
		v, ok, err := s.c.get(k, true)
		if err != nil || !ok {
			return err
		}
		if s.have {
			v = s.reduce(s.acc, v)
		}
		s.acc, s.have = v, true
		return s.c.clear(k)
	}
	err := s.c.kc.mergeInto(target, sources, fold, func() error {
		if !s.have {
			return nil
		}
		acc := s.acc
		k := s.c.kc.stateKey()
		old, ok, err := s.c.get(k, true)
		if err != nil {
			return err
		}
		if ok {
			acc = s.reduce(old, acc)
		}
		return s.c.put(k, acc)
	})
	s.acc = zero
	return err
}

// AggregateFunc is an incremental aggregation (Flink's AggregateFunction):
// inputs are added to an accumulator, accumulators merge, and the result is
// read from the accumulator.
type AggregateFunc[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(acc ACC, in IN) ACC
	Merge(a, b ACC) ACC
	Result(acc ACC) OUT
}

// AggregateFuncs is an AggregateFunc of four functions, all required.
type AggregateFuncs[IN, ACC, OUT any] struct {
	CreateFunc func() ACC
	AddFunc    func(acc ACC, in IN) ACC
	MergeFunc  func(a, b ACC) ACC
	ResultFunc func(acc ACC) OUT
}

func (f AggregateFuncs[IN, ACC, OUT]) CreateAccumulator() ACC { return f.CreateFunc() }
func (f AggregateFuncs[IN, ACC, OUT]) Add(acc ACC, in IN) ACC { return f.AddFunc(acc, in) }
func (f AggregateFuncs[IN, ACC, OUT]) Merge(a, b ACC) ACC     { return f.MergeFunc(a, b) }
func (f AggregateFuncs[IN, ACC, OUT]) Result(acc ACC) OUT     { return f.ResultFunc(acc) }

// AggregatingState keeps an accumulator per key and namespace, stored with
// the ACC codec (Flink's AggregatingState).
type AggregatingState[IN, ACC, OUT any] struct {
	c    cell[ACC]
	agg  AggregateFunc[IN, ACC, OUT]
	acc  ACC
	have bool
}

// NewAggregatingState registers the aggregating state name of kc's
// operator; codec encodes the accumulator.
func NewAggregatingState[IN, ACC, OUT any](kc *KeyedContext, name string, codec Codec[ACC], agg AggregateFunc[IN, ACC, OUT], ttl TTLConfig) (*AggregatingState[IN, ACC, OUT], error) {
	if agg == nil {
		return nil, fmt.Errorf("state: %s: nil aggregate function", name)
	}
	si, err := kc.register(name, false, ttl)
	if err != nil {
		return nil, err
	}
	return &AggregatingState[IN, ACC, OUT]{c: cell[ACC]{kc: kc, si: si, codec: codec}, agg: agg}, nil
}

// Get returns the result of the current key and namespace's accumulator,
// or false if nothing was added (or it expired).
func (s *AggregatingState[IN, ACC, OUT]) Get() (OUT, bool, error) {
	acc, ok, err := s.c.get(s.c.kc.stateKey(), false)
	if err != nil || !ok {
		var zero OUT
		return zero, false, err
	}
	return s.agg.Result(acc), true, nil
}

// Add adds in to the accumulator of the current key and namespace (a new
// one from CreateAccumulator if there is none).
func (s *AggregatingState[IN, ACC, OUT]) Add(in IN) error {
	k := s.c.kc.stateKey()
	acc, ok, err := s.c.get(k, true)
	if err != nil {
		return err
	}
	if !ok {
		acc = s.agg.CreateAccumulator()
	}
	return s.c.put(k, s.agg.Add(acc, in))
}

// Clear removes the accumulator of the current key and namespace.
func (s *AggregatingState[IN, ACC, OUT]) Clear() error { return s.c.clear(s.c.kc.stateKey()) }

// MergeNamespaces merges the accumulators of the sources namespaces of the
// current key into target's and clears the sources. The current namespace
// is kept.
func (s *AggregatingState[IN, ACC, OUT]) MergeNamespaces(target []byte, sources ...[]byte) error {
	var zero ACC
	s.acc, s.have = zero, false
	fold := func() error {
		k := s.c.kc.stateKey()
		a, ok, err := s.c.get(k, true)
		if err != nil || !ok {
			return err
		}
		if s.have {
			a = s.agg.Merge(s.acc, a)
		}
		s.acc, s.have = a, true
		return s.c.clear(k)
	}
	err := s.c.kc.mergeInto(target, sources, fold, func() error {
		if !s.have {
			return nil
		}
		acc := s.acc
		k := s.c.kc.stateKey()
		old, ok, err := s.c.get(k, true)
		if err != nil {
			return err
		}
		if ok {
			acc = s.agg.Merge(old, acc)
		}
		return s.c.put(k, acc)
	})
	s.acc = zero
	return err
}

// ListState is a list of values per key and namespace (Flink's ListState).
// The list is one stored value, so Add copies it: O(length) per Add, fine
// for the short lists of a window's elements, not for unbounded ones. With
// TTL each element expires on its own.
type ListState[T any] struct {
	kc    *KeyedContext
	si    *stateInfo
	codec Codec[T]
	buf   []byte
	elem  []byte
	tmp   []T
}

// NewListState registers the list state name of kc's operator.
func NewListState[T any](kc *KeyedContext, name string, codec Codec[T], ttl TTLConfig) (*ListState[T], error) {
	si, err := kc.register(name, true, ttl)
	if err != nil {
		return nil, err
	}
	return &ListState[T]{kc: kc, si: si, codec: codec}, nil
}

// Get appends the elements of the current key and namespace to dst, in
// the order they were added, and returns it (dst unchanged if the list is
// empty). Reusing dst avoids allocating.
func (s *ListState[T]) Get(dst []T) ([]T, error) {
	k := s.kc.stateKey()
	v, ok, err := s.kc.be.Get(s.si.bucket, k)
	if err != nil || !ok {
		return dst, err
	}
	stamped, err := listTag(v)
	if err != nil {
		return dst, fmt.Errorf("state: %s: %w", s.si.name, err)
	}
	ttl := stamped && s.si.ttl.enabled()
	var now int64
	if ttl {
		now = s.kc.now()
	}
	rewrite := false
	n0 := len(dst)
	for rest := v[1:]; len(rest) > 0; {
		var ts int64
		var elem []byte
		if ts, elem, rest, err = nextElement(rest, stamped); err != nil {
			return dst[:n0], fmt.Errorf("state: %s: %w", s.si.name, err)
		}
		if ttl {
			if s.si.ttl.expired(ts, now) {
				rewrite = true
				if !s.si.ttl.returnOnce {
					continue
				}
			} else if s.si.ttl.onRead && ts != now {
				rewrite = true
			}
		}
		x, err := s.codec.Decode(elem)
		if err != nil {
			return dst[:n0], fmt.Errorf("state: %s: %w: %w", s.si.name, ErrCorrupt, err)
		}
		dst = append(dst, x)
	}
	if !rewrite {
		return dst, nil
	}
	// Drop the expired elements, restamp the read ones (v is still valid:
	// no Backend call since Get).
	buf, left := append(s.buf[:0], tagStamped), false
	for rest := v[1:]; len(rest) > 0; {
		ts, elem, r, _ := nextElement(rest, true)
		rest = r
		if s.si.ttl.expired(ts, now) {
			continue
		}
		if s.si.ttl.onRead {
			ts = now
		}
		buf, left = appendElement(buf, true, ts, elem), true
	}
	s.buf = buf
	if !left {
		return dst, s.kc.be.Delete(s.si.bucket, k)
	}
	return dst, s.kc.be.Put(s.si.bucket, k, buf)
}

// Add appends v to the list of the current key and namespace.
func (s *ListState[T]) Add(v T) error {
	return s.write(true, v)
}

// AddAll appends vs, in order.
func (s *ListState[T]) AddAll(vs []T) error {
	if len(vs) == 0 {
		return nil
	}
	return s.write(true, vs...)
}

// Update replaces the list of the current key and namespace with vs (an
// empty vs clears it).
func (s *ListState[T]) Update(vs []T) error {
	if len(vs) == 0 {
		return s.Clear()
	}
	return s.write(false, vs...)
}

// Clear removes the list of the current key and namespace.
func (s *ListState[T]) Clear() error { return s.kc.be.Delete(s.si.bucket, s.kc.stateKey()) }

func (s *ListState[T]) write(keep bool, vs ...T) error {
	k := s.kc.stateKey()
	ttl := s.si.ttl.enabled()
	var now int64
	if ttl {
		now = s.kc.now()
	}
	buf := append(s.buf[:0], tagPlain) // stamps are per element, not in the header
	if ttl {
		buf[0] = tagStamped
	}
	if keep {
		old, ok, err := s.kc.be.Get(s.si.bucket, k)
		if err != nil {
			return err
		}
		if ok {
			if buf, err = s.keepElements(buf, old, ttl, now); err != nil {
				return err
			}
		}
	}
	for _, v := range vs {
		s.elem = s.codec.Append(s.elem[:0], v)
		buf = appendElement(buf, ttl, now, s.elem)
	}
	s.buf = buf
	return s.kc.be.Put(s.si.bucket, k, buf)
}

// keepElements appends the live elements of the stored list old to buf,
// converting their stamps to the state's current layout.
func (s *ListState[T]) keepElements(buf, old []byte, ttl bool, now int64) ([]byte, error) {
	stamped, err := listTag(old)
	if err != nil {
		return buf, fmt.Errorf("state: %s: %w", s.si.name, err)
	}
	if stamped == ttl && !ttl {
		return append(buf, old[1:]...), nil // plain to plain: nothing expires
	}
	for rest := old[1:]; len(rest) > 0; {
		var ts int64
		var elem []byte
		if ts, elem, rest, err = nextElement(rest, stamped); err != nil {
			return buf, fmt.Errorf("state: %s: %w", s.si.name, err)
		}
		if !stamped {
			ts = now // TTL enabled since: the clock starts now
		} else if ttl && s.si.ttl.expired(ts, now) {
			continue
		}
		buf = appendElement(buf, ttl, ts, elem)
	}
	return buf, nil
}

// MergeNamespaces appends the lists of the sources namespaces of the
// current key to target's (in the order of sources) and clears the
// sources. The current namespace is kept.
func (s *ListState[T]) MergeNamespaces(target []byte, sources ...[]byte) error {
	s.tmp = s.tmp[:0]
	defer func() { clear(s.tmp); s.tmp = s.tmp[:0] }()
	return s.kc.mergeInto(target, sources, func() error {
		var err error
		if s.tmp, err = s.Get(s.tmp); err != nil {
			return err
		}
		return s.Clear()
	}, func() error {
		return s.AddAll(s.tmp)
	})
}

// MapState is a map per key and namespace (Flink's MapState), one stored
// entry per map key: Get, Put, Remove and Contains are point operations
// through the cache, while Range, IsEmpty and Clear scan (Backend.Scan
// flushes the write-back cache first, so they cost more). With TTL each
// entry expires on its own.
type MapState[K, V any] struct {
	kc    *KeyedContext
	si    *stateInfo
	keys  Codec[K]
	vals  Codec[V]
	ekey  []byte
	buf   []byte
	arena []byte
	ents  []mapEntry
}

// mapEntry locates a scanned entry in MapState.arena: the full storage key
// arena[at:valAt], the stored value arena[valAt:end].
type mapEntry struct{ at, valAt, end int }

// NewMapState registers the map state name of kc's operator; keys encodes
// the map keys, which must be deterministic (equal keys, equal bytes).
func NewMapState[K, V any](kc *KeyedContext, name string, keys Codec[K], values Codec[V], ttl TTLConfig) (*MapState[K, V], error) {
	si, err := kc.register(name, false, ttl)
	if err != nil {
		return nil, err
	}
	return &MapState[K, V]{kc: kc, si: si, keys: keys, vals: values}, nil
}

func (s *MapState[K, V]) entryKey(k K) []byte {
	s.ekey = s.keys.Append(append(s.ekey[:0], s.kc.stateKey()...), k)
	return s.ekey
}

// Get returns the value of k in the map of the current key and namespace.
func (s *MapState[K, V]) Get(k K) (V, bool, error) {
	var zero V
	p, ok, err := s.kc.getValue(s.si, s.entryKey(k), false)
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := s.vals.Decode(p)
	if err != nil {
		return zero, false, fmt.Errorf("state: %s: %w: %w", s.si.name, ErrCorrupt, err)
	}
	return v, true, nil
}

// Contains reports whether k is in the map (and not expired).
func (s *MapState[K, V]) Contains(k K) (bool, error) {
	_, ok, err := s.kc.getValue(s.si, s.entryKey(k), false)
	return ok, err
}

// Put sets k to v.
func (s *MapState[K, V]) Put(k K, v V) error {
	key := s.entryKey(k)
	s.buf = s.vals.Append(s.kc.header(s.si, s.buf), v)
	return s.kc.be.Put(s.si.bucket, key, s.buf)
}

// Remove deletes k; removing a missing key is not an error.
func (s *MapState[K, V]) Remove(k K) error {
	return s.kc.be.Delete(s.si.bucket, s.entryKey(k))
}

// Range calls fn for the entries of the map of the current key and
// namespace, in the byte order of the encoded keys (not numeric order for
// little-endian integers), until fn returns false. fn may call any state
// method except Range, IsEmpty and Clear of this map, and sees the entries
// as of the call to Range.
func (s *MapState[K, V]) Range(fn func(k K, v V) bool) error {
	prefix := s.kc.stateKey()
	if err := s.scan(prefix); err != nil {
		return err
	}
	for _, e := range s.ents {
		key := s.arena[e.at:e.valAt]
		p, ok, err := s.kc.liveValue(s.si, key, s.arena[e.valAt:e.end], false)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		v, err := s.vals.Decode(p)
		if err != nil {
			return fmt.Errorf("state: %s: %w: %w", s.si.name, ErrCorrupt, err)
		}
		k, err := s.keys.Decode(key[len(prefix):])
		if err != nil {
			return fmt.Errorf("state: %s: %w: %w", s.si.name, ErrCorrupt, err)
		}
		if !fn(k, v) {
			return nil
		}
	}
	return nil
}

// scan copies the entries under prefix into the arena.
func (s *MapState[K, V]) scan(prefix []byte) error {
	s.arena, s.ents = s.arena[:0], s.ents[:0]
	err := s.kc.be.Scan(s.si.bucket, prefix, func(k, v []byte) bool {
		if !bytes.HasPrefix(k, prefix) {
			return false
		}
		e := mapEntry{at: len(s.arena)}
		s.arena = append(s.arena, k...)
		e.valAt = len(s.arena)
		s.arena = append(s.arena, v...)
		e.end = len(s.arena)
		s.ents = append(s.ents, e)
		return true
	})
	if err != nil {
		return fmt.Errorf("state: %s: %w", s.si.name, err)
	}
	return nil
}

// IsEmpty reports whether the map of the current key and namespace has no
// (unexpired) entry.
func (s *MapState[K, V]) IsEmpty() (bool, error) {
	empty := true
	err := s.Range(func(K, V) bool { empty = false; return false })
	return empty, err
}

// Clear removes every entry of the map of the current key and namespace.
func (s *MapState[K, V]) Clear() error {
	if err := s.scan(s.kc.stateKey()); err != nil {
		return err
	}
	for _, e := range s.ents {
		if err := s.kc.be.Delete(s.si.bucket, s.arena[e.at:e.valAt]); err != nil {
			return err
		}
	}
	return nil
}
