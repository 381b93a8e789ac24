package window

import "fmt"

// LiveKeys is a Store that keeps the set of live keys of the Store it
// wraps: the keys holding at least one window state or a count-window
// counter. A key becomes live when its first window is created (or its
// counter first set) and leaves when its last window is deleted (purged
// after its cleanup time, or absorbed into a session) and it has no
// counter; a count-window key's counter is never deleted, so it stays live.
// Its memory is one map entry per live key (the key's bytes and about 50
// bytes).
type LiveKeys struct {
	Store
	keys map[string]*keyUse
	cur  []byte
	// Pending marks the current key as already counted by the caller (it
	// reserved room for it before handing over a reading): its birth then
	// does not call OnBirth, and clears Pending.
	Pending bool
	// OnBirth and OnDeath, when set, are called as a key becomes live and
	// stops being live.
	OnBirth, OnDeath func()
}

// keyUse is what makes a key live.
type keyUse struct {
	windows int32
	counter bool
}

func (u keyUse) live() bool { return u.windows > 0 || u.counter }

// NewLiveKeys returns s wrapped, with no key live; Load counts the keys s
// already holds.
func NewLiveKeys(s Store) *LiveKeys {
	return &LiveKeys{Store: s, keys: map[string]*keyUse{}}
}

// Len returns the number of live keys.
func (l *LiveKeys) Len() int { return len(l.keys) }

// Live reports whether key is live.
func (l *LiveKeys) Live(key []byte) bool {
	_, ok := l.keys[string(key)]
	return ok
}

// Load adds the keys of store (the Store l wraps, after a restore) to the
// live set, without calling OnBirth, and returns how many it added.
func (l *LiveKeys) Load(store *StateStore) (int, error) {
	n := len(l.keys)
	err := store.eachKey(func(key []byte, tag byte) {
		if tag != nsWindow && tag != nsCount {
			return // a merging set: its windows count
		}
		u := l.keys[string(key)]
		if u == nil {
			u = new(keyUse)
			l.keys[string(key)] = u
		}
		if tag == nsWindow {
			u.windows++
		} else {
			u.counter = true
		}
	})
	return len(l.keys) - n, err
}

// SetCurrentKey implements Store.
func (l *LiveKeys) SetCurrentKey(keyGroup uint16, key []byte) {
	l.cur = append(l.cur[:0], key...)
	l.Store.SetCurrentKey(keyGroup, key)
}

// CreateWindow implements Store.
func (l *LiveKeys) CreateWindow(w Window, nAccs int) *WindowState {
	st := l.Store.CreateWindow(w, nAccs)
	l.change(func(u *keyUse) { u.windows++ })
	return st
}

// DeleteWindow implements Store. The operator may delete a window that
// does not exist (a paned window's empty first pane): the wrapped store's
// count says whether one went.
func (l *LiveKeys) DeleteWindow(w Window) {
	before, _ := l.Store.Counts()
	l.Store.DeleteWindow(w)
	if after, _ := l.Store.Counts(); after < before {
		l.change(func(u *keyUse) { u.windows-- })
	}
}

// PutReadingCount implements Store.
func (l *LiveKeys) PutReadingCount(n int64) {
	l.Store.PutReadingCount(n)
	if u := l.keys[string(l.cur)]; (u != nil && u.counter) != (n != 0) {
		l.change(func(u *keyUse) { u.counter = n != 0 })
	}
}

// change applies fn to the current key's use, calling OnBirth or OnDeath
// when it starts or stops being live.
func (l *LiveKeys) change(fn func(*keyUse)) {
	u := l.keys[string(l.cur)]
	if u != nil {
		if fn(u); !u.live() {
			delete(l.keys, string(l.cur))
			if l.OnDeath != nil {
				l.OnDeath()
			}
		}
		return
	}
	u = new(keyUse)
	if fn(u); !u.live() {
		return
	}
	l.keys[string(l.cur)] = u
	if l.Pending {
		l.Pending = false
	} else if l.OnBirth != nil {
		l.OnBirth()
	}
}

// eachKey calls fn with the key and namespace tag of every state entry of
// the windows bucket, in key order, after a Flush.
func (s *StateStore) eachKey(fn func(key []byte, tag byte)) error {
	if err := s.Flush(); err != nil {
		return err
	}
	var bad error
	err := s.be.Scan(s.bucket, nil, func(k, _ []byte) bool {
		key, tag, err := splitStateKey(k)
		if err != nil {
			bad = err
			return false
		}
		fn(key, tag)
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("window: state store: list keys: %w", err)
	}
	return nil
}
