package state

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Value envelope: every value a typed keyed state stores starts with a tag
// byte, which versions the layout (an unknown tag is ErrCorrupt):
//
//	plain   = 0x01 payload
//	stamped = 0x02 writeTime:i64le payload
//
// List state keeps one stamp per element (TTL applies to each element, as
// in Flink):
//
//	plain   = 0x01 (len:uvarint element)*
//	stamped = 0x02 (writeTime:i64le len:uvarint element)*
//
// writeTime is milliseconds from KeyedOptions.Now. States with TTL write
// stamped values, others plain ones. A TTL state treats a plain value (from
// before TTL was enabled) as never expiring until it is written again; a
// state without TTL reads a stamped value and ignores the stamp.
const (
	tagPlain   = 0x01
	tagStamped = 0x02
	stampBytes = 8
)

// TTLUpdate says which accesses restart a value's time to live. The zero
// value is invalid.
type TTLUpdate uint8

const (
	// OnCreateAndWrite restarts the TTL when the value is written (Flink's
	// default).
	OnCreateAndWrite TTLUpdate = iota + 1
	// OnReadAndWrite restarts the TTL when the value is read as well; a
	// read then costs a write.
	OnReadAndWrite
)

// TTLVisibility says whether an expired value that is still stored may be
// returned. The zero value is invalid.
type TTLVisibility uint8

const (
	// NeverReturnExpired: an expired value is never returned (it is deleted
	// when met). Results do not depend on when cleanup runs.
	NeverReturnExpired TTLVisibility = iota + 1
	// ReturnExpiredIfNotCleanedUp: an expired value met before cleanup
	// removed it is returned once, and deleted. A snapshot leaves expired
	// values out (FilterSnapshot), so a checkpoint is a cleanup too: after
	// a restore, or once a Bolt with cold reads reads the value back from
	// the checkpoint files, it is gone.
	ReturnExpiredIfNotCleanedUp
)

// TTLConfig sets the time to live of a state's values (Flink's
// StateTtlConfig, processing time only). The zero value means no TTL.
//
// Time comes from KeyedOptions.Now in milliseconds and is compared with
// stamps restored from checkpoints, possibly written on another device:
// use wall-clock time, and expect early or late expiry on a device whose
// clock is not yet synchronized.
type TTLConfig struct {
	// TTL is how long a value lives after its last update; 0 disables TTL,
	// otherwise at least 1ms. A value is expired when writeTime + TTL ≤ now.
	TTL time.Duration
	// Update is required when TTL is set.
	Update TTLUpdate
	// Visibility is required when TTL is set.
	Visibility TTLVisibility
}

// ttlPolicy is a validated TTLConfig.
type ttlPolicy struct {
	ms         int64 // 0: no TTL
	onRead     bool
	returnOnce bool // ReturnExpiredIfNotCleanedUp
}

func (c TTLConfig) policy() (ttlPolicy, error) {
	if c.TTL == 0 {
		return ttlPolicy{}, nil
	}
	if c.TTL < time.Millisecond {
		return ttlPolicy{}, fmt.Errorf("state: ttl %v: must be at least 1ms", c.TTL)
	}
	p := ttlPolicy{ms: c.TTL.Milliseconds()}
	switch c.Update {
	case OnCreateAndWrite:
	case OnReadAndWrite:
		p.onRead = true
	default:
		return ttlPolicy{}, fmt.Errorf("state: ttl update %d: want OnCreateAndWrite or OnReadAndWrite", c.Update)
	}
	switch c.Visibility {
	case NeverReturnExpired:
	case ReturnExpiredIfNotCleanedUp:
		p.returnOnce = true
	default:
		return ttlPolicy{}, fmt.Errorf("state: ttl visibility %d: want NeverReturnExpired or ReturnExpiredIfNotCleanedUp", c.Visibility)
	}
	return p, nil
}

func (p ttlPolicy) enabled() bool { return p.ms > 0 }

// expired reports whether a value written at ts is expired at now
// (ts + ms ≤ now), without overflow at either end of int64: a clock that has
// not started (math.MinInt64) expires nothing.
func (p ttlPolicy) expired(ts, now int64) bool { return ts <= now-p.ms && now-p.ms <= now }

// openValue splits a value envelope into its payload and stamp.
func openValue(v []byte) (payload []byte, ts int64, stamped bool, err error) {
	if len(v) == 0 {
		return nil, 0, false, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	switch v[0] {
	case tagPlain:
		return v[1:], 0, false, nil
	case tagStamped:
		if len(v) < 1+stampBytes {
			return nil, 0, false, fmt.Errorf("%w: stamped value of %d bytes", ErrCorrupt, len(v))
		}
		return v[1+stampBytes:], int64(binary.LittleEndian.Uint64(v[1:])), true, nil
	default:
		return nil, 0, false, fmt.Errorf("%w: value tag %#x", ErrCorrupt, v[0])
	}
}

// appendHeader starts a value envelope (or a list value) in dst.
func appendHeader(dst []byte, stamped bool, now int64) []byte {
	if !stamped {
		return append(dst, tagPlain)
	}
	dst = append(dst, tagStamped)
	return binary.LittleEndian.AppendUint64(dst, uint64(now))
}

// listTag returns whether list value v holds stamped elements.
func listTag(v []byte) (stamped bool, err error) {
	if len(v) == 0 {
		return false, fmt.Errorf("%w: empty list value", ErrCorrupt)
	}
	switch v[0] {
	case tagPlain:
		return false, nil
	case tagStamped:
		return true, nil
	default:
		return false, fmt.Errorf("%w: list tag %#x", ErrCorrupt, v[0])
	}
}

// nextElement splits the first element off the elements of a list value.
func nextElement(b []byte, stamped bool) (ts int64, elem, rest []byte, err error) {
	if stamped {
		if len(b) < stampBytes {
			return 0, nil, nil, fmt.Errorf("%w: list element stamp", ErrCorrupt)
		}
		ts = int64(binary.LittleEndian.Uint64(b))
		b = b[stampBytes:]
	}
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)-l) {
		return 0, nil, nil, fmt.Errorf("%w: list element length", ErrCorrupt)
	}
	return ts, b[l : l+int(n)], b[l+int(n):], nil
}

// appendElement appends one list element.
func appendElement(dst []byte, stamped bool, ts int64, elem []byte) []byte {
	if stamped {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(ts))
	}
	dst = binary.AppendUvarint(dst, uint64(len(elem)))
	return append(dst, elem...)
}

// dropExpiredElements appends to dst the list value v without the elements
// expired at now, and reports whether any was dropped and whether any is
// left. A plain list has no stamps, so nothing expires.
func dropExpiredElements(dst, v []byte, p ttlPolicy, now int64) (out []byte, dropped, left bool, err error) {
	stamped, err := listTag(v)
	if err != nil || !stamped {
		return dst, false, len(v) > 1, err
	}
	dst = append(dst, tagStamped)
	for rest := v[1:]; len(rest) > 0; {
		var ts int64
		var elem []byte
		if ts, elem, rest, err = nextElement(rest, true); err != nil {
			return dst, false, false, err
		}
		if p.expired(ts, now) {
			dropped = true
			continue
		}
		dst = appendElement(dst, true, ts, elem)
		left = true
	}
	return dst, dropped, left, nil
}

// Cleanup deletes expired values of the context's TTL states, examining at
// most maxEntries stored entries per call (a value, a list, or one map
// entry each), from where the previous call stopped, round robin over the
// states. It returns the number examined; 0 means there is no TTL state.
//
// It is the background cleanup of Flink's incremental strategy: expired
// values are invisible anyway (with NeverReturnExpired), so when it runs
// changes no result, only how soon their space is reclaimed. Each call
// flushes the write-back cache (it reads with Backend.Scan): call it from
// the operator's goroutine every batch or timer tick, not per reading —
// e.g. Cleanup(1000) per 1,000 readings keeps pace with a store whose
// entries are written about as often as they expire.
func (kc *KeyedContext) Cleanup(maxEntries int) (int, error) {
	examined := 0
	for visited := 0; visited < len(kc.ttlStates) && examined < maxEntries; visited++ {
		si := kc.ttlStates[kc.cleanNext]
		n, done, err := kc.cleanState(si, maxEntries-examined)
		examined += n
		if err != nil {
			return examined, err
		}
		if !done {
			break
		}
		kc.cleanNext = (kc.cleanNext + 1) % len(kc.ttlStates)
	}
	return examined, nil
}

// cleanState examines up to budget entries of si from its cursor and
// reports whether it reached the end of the bucket (the cursor restarts).
func (kc *KeyedContext) cleanState(si *stateInfo, budget int) (examined int, done bool, err error) {
	now := kc.now()
	kc.cleanArena, kc.cleanOps = kc.cleanArena[:0], kc.cleanOps[:0]
	done = true
	var scanErr error
	err = kc.be.Scan(si.bucket, si.cursor, func(k, v []byte) bool {
		if examined == budget {
			done = false
			si.cursor = append(si.cursor[:0], k...) // resume at k, not yet examined
			return false
		}
		examined++
		op := cleanOp{keyAt: len(kc.cleanArena)}
		kc.cleanArena = append(kc.cleanArena, k...)
		op.valAt = len(kc.cleanArena)
		if si.list {
			var dropped, left bool
			kc.cleanArena, dropped, left, scanErr = dropExpiredElements(kc.cleanArena, v, si.ttl, now)
			if scanErr != nil {
				return false
			}
			if !dropped {
				kc.cleanArena = kc.cleanArena[:op.keyAt]
				return true
			}
			op.del = !left
		} else {
			_, ts, stamped, err := openValue(v)
			if err != nil {
				scanErr = err
				return false
			}
			if !stamped || !si.ttl.expired(ts, now) {
				kc.cleanArena = kc.cleanArena[:op.keyAt]
				return true
			}
			op.del = true
		}
		op.end = len(kc.cleanArena)
		kc.cleanOps = append(kc.cleanOps, op)
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return examined, false, fmt.Errorf("state: cleanup %s: %w", si.name, err)
	}
	if done {
		si.cursor = si.cursor[:0]
	}
	for _, op := range kc.cleanOps {
		key := kc.cleanArena[op.keyAt:op.valAt]
		if op.del {
			err = kc.be.Delete(si.bucket, key)
		} else {
			err = kc.be.Put(si.bucket, key, kc.cleanArena[op.valAt:op.end])
		}
		if err != nil {
			return examined, false, fmt.Errorf("state: cleanup %s: %w", si.name, err)
		}
	}
	return examined, done, nil
}

// cleanOp is a deletion or rewrite found by a cleanup scan, in kc.cleanArena.
type cleanOp struct {
	keyAt, valAt, end int
	del               bool
}

// FilterSnapshot returns snap without the values of this context's TTL
// states that are expired at the time of the call (Flink's cleanup in full
// snapshots): a full snapshot skips them, an incremental one yields them as
// deletions, and list values lose their expired elements. Entries of other
// buckets pass through unchanged. Call it at the barrier, right after
// Backend.Snapshot, and write the returned Snapshot's entries instead;
// closing it closes snap.
//
// Like snap, the result may be read and closed by another goroutine while
// the owner goes on using the context: it holds only the time and bucket
// table captured by this call. Without TTL states it returns snap.
func (kc *KeyedContext) FilterSnapshot(snap Snapshot) Snapshot {
	if len(kc.ttlStates) == 0 {
		return snap
	}
	f := &ttlSnapshot{Snapshot: snap, now: kc.now(), states: make(map[string]stateFilter, len(kc.ttlStates))}
	for _, si := range kc.ttlStates {
		f.states[si.name] = stateFilter{ttl: si.ttl, list: si.list}
	}
	return f
}

type stateFilter struct {
	ttl  ttlPolicy
	list bool
}

type ttlSnapshot struct {
	Snapshot
	now    int64
	states map[string]stateFilter // by bucket name
}

func (f *ttlSnapshot) Entries(fn func(bucket, key, value []byte, deleted bool) error) error {
	var buf []byte
	incremental := f.Snapshot.Incremental()
	return f.Snapshot.Entries(func(bucket, key, value []byte, deleted bool) error {
		st, ok := f.states[string(bucket)]
		if !ok || deleted {
			return fn(bucket, key, value, deleted)
		}
		live := true
		if st.list {
			var dropped bool
			var err error
			buf, dropped, live, err = dropExpiredElements(buf[:0], value, st.ttl, f.now)
			if err != nil {
				return fmt.Errorf("state: filter snapshot %s: %w", bucket, err)
			}
			if dropped && live {
				return fn(bucket, key, buf, false)
			}
			live = live || !dropped // an empty list that was empty already stays
		} else {
			_, ts, stamped, err := openValue(value)
			if err != nil {
				return fmt.Errorf("state: filter snapshot %s: %w", bucket, err)
			}
			live = !stamped || !st.ttl.expired(ts, f.now)
		}
		switch {
		case live:
			return fn(bucket, key, value, false)
		case incremental:
			return fn(bucket, key, nil, true)
		default:
			return nil
		}
	})
}
