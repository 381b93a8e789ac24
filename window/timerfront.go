package window

// timerFront holds a StateStore's recent timers in memory, so a timer
// registered and popped between two checkpoints never costs a backend write,
// delete or lookup, and popping one written at a checkpoint costs a delete
// but no backend scan. A front timer is stored (Flush wrote a copy into the
// backend, for the snapshot) or not (only here). The backend's other timers
// are backend-only; StateStore merges them with the front in PopTimer (both
// give timers in the order of their encoded keys), and a full front moves
// everything into the backend.
//
// Keys are interned as frontKey records (found without allocating through
// map[string]*frontKey indexed by string(key)); records without timers are
// dropped in batches, so memory follows the keys with front timers.
type timerFront struct {
	keys   map[string]*frontKey
	live   int // records with timers
	queues [CountDomain + 1]timerQueue[*frontKey]
	n      int                  // timers, all domains
	stored [CountDomain + 1]int // of them, stored in the backend, per domain
}

type frontKey struct {
	kg     uint16
	key    []byte
	timers int
}

func frontKeyBytes(k *frontKey) []byte { return k.key }

func newTimerFront() timerFront {
	f := timerFront{keys: make(map[string]*frontKey)}
	for d := range f.queues {
		f.queues[d] = newTimerQueue(frontKeyBytes)
	}
	return f
}

// lookup returns key's record, or nil.
func (f *timerFront) lookup(key []byte) *frontKey { return f.keys[string(key)] }

// intern returns key's record, creating it.
func (f *timerFront) intern(kg uint16, key []byte) *frontKey {
	if k := f.keys[string(key)]; k != nil {
		return k
	}
	if len(f.keys) >= 1024 && len(f.keys) > 2*f.live {
		f.sweep()
	}
	k := &frontKey{kg: kg, key: append([]byte(nil), key...)}
	f.keys[string(k.key)] = k
	return k
}

// sweep drops the records without timers. Stale queue entries may still
// point at them; they are skipped as removed timers are, since a later
// record of the same key is another pointer.
func (f *timerFront) sweep() {
	for s, k := range f.keys {
		if k.timers == 0 {
			delete(f.keys, s)
		}
	}
}

func (f *timerFront) has(d Domain, t int64, k *frontKey, w Window) bool {
	return f.queues[d].has(t, timerID[*frontKey]{k, w})
}

func (f *timerFront) add(d Domain, t int64, k *frontKey, w Window) {
	if f.queues[d].add(t, timerID[*frontKey]{k, w}) {
		f.count(d, k, 1, false)
	}
}

// remove removes a timer and reports whether it was here and whether it
// was stored.
func (f *timerFront) remove(d Domain, t int64, k *frontKey, w Window) (ok, stored bool) {
	if ok, stored = f.queues[d].remove(t, timerID[*frontKey]{k, w}); ok {
		f.count(d, k, -1, stored)
	}
	return ok, stored
}

// peek returns the earliest front timer of d with time ≤ upTo; take
// removes it and reports whether it was stored.
func (f *timerFront) peek(d Domain, upTo int64) (*frontKey, Window, int64, bool) {
	id, t, ok := f.queues[d].peek(upTo)
	return id.k, id.w, t, ok
}

func (f *timerFront) take(d Domain, k *frontKey) (stored bool) {
	stored = f.queues[d].take()
	f.count(d, k, -1, stored)
	return stored
}

func (f *timerFront) count(d Domain, k *frontKey, delta int, stored bool) {
	switch k.timers += delta; {
	case delta > 0 && k.timers == 1:
		f.live++
	case delta < 0 && k.timers == 0:
		f.live--
	}
	f.n += delta
	if stored {
		f.stored[d] += delta
	}
}

// unstored returns the number of timers not stored in the backend.
func (f *timerFront) unstored() int {
	n := f.n
	for _, s := range f.stored {
		n -= s
	}
	return n
}

// store calls fn for every timer not stored yet, in no particular order,
// and marks it stored.
func (f *timerFront) store(fn func(d Domain, t int64, k *frontKey, w Window)) {
	for d := range f.queues {
		q := &f.queues[d]
		for tk, stored := range q.set {
			if !stored {
				fn(Domain(d), tk.t, tk.id.k, tk.id.w)
				q.set[tk] = true
				f.stored[d]++
			}
		}
	}
}

// reset empties the front, keeping its memory but no key records.
func (f *timerFront) reset() {
	for d := range f.queues {
		f.queues[d].reset()
	}
	clear(f.keys)
	f.live, f.n = 0, 0
	f.stored = [CountDomain + 1]int{}
}
