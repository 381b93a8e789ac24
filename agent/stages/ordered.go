package stages

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state"
)

// hold stores results by (window end, key, window start, firing), the
// order they are released in. A window fires each number once, so keys
// never collide.
func (p *Pipeline) hold(st *subtask, d *operators.Delivery) {
	for _, it := range d.Items() {
		r := it.Result
		if r == nil {
			continue
		}
		// Prefixed by the key group, so a restore with another parallelism
		// hands each result to the subtask that owns its key.
		kg := state.KeyGroup(r.Key, p.maxKeyGroups)
		st.heldKey = heldKey(append(st.heldKey[:0], byte(kg>>8), byte(kg)), r.End, r.Key, r.Start, r.Firing)
		if r.Kind == record.KindReading {
			// Records of one key and time: in source order.
			st.heldKey = binary.BigEndian.AppendUint64(st.heldKey, r.Seq)
		}
		if err := st.backend.Put(st.held, st.heldKey, it.Payload); err != nil {
			// A result that cannot be held would be lost: the subtask
			// fails (stateErr) and its region restarts from the last
			// checkpoint.
			st.holdErr = fmt.Errorf("holding a result: %w", err)
			return
		}
	}
}

// heldKey encodes the release order so that byte order is (end, key,
// start, firing): times with the sign bit flipped, the key escaped (0x00 →
// 0x00 0xff) and terminated by 0x00 0x01 so a shorter key sorts first.
func heldKey(dst []byte, end int64, key []byte, start int64, firing int) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(end)^(1<<63))
	for _, c := range key {
		dst = append(dst, c)
		if c == 0 {
			dst = append(dst, 0xff)
		}
	}
	dst = append(dst, 0, 1)
	dst = binary.BigEndian.AppendUint64(dst, uint64(start)^(1<<63))
	return binary.BigEndian.AppendUint32(dst, uint32(firing))
}

type heldResult struct{ key, value []byte }

// heldMerge gathers the held results of every subtask of an ordered
// pipeline at the end of input and sends them, sorted, before any subtask
// goes on (so they belong to the epoch of the end of input).
type heldMerge struct {
	mu      sync.Mutex
	arrived int
	results []heldResult
	done    chan struct{}
}

// releaseHeld hands st's held results to the merge and waits until the last
// subtask has sent them all.
func (p *Pipeline) releaseHeld(st *subtask) {
	var mine []heldResult
	err := st.backend.Scan(st.held, nil, func(key, value []byte) bool {
		mine = append(mine, heldResult{append([]byte(nil), key...), append([]byte(nil), value...)})
		return true
	})
	if err != nil && st.holdErr == nil {
		st.holdErr = fmt.Errorf("reading held results: %w", err)
	}
	if st.holdErr != nil {
		// Some results are missing: release none. The subtask fails
		// (stateErr) and its region restarts from the last checkpoint.
		p.arriveHeld(st, nil, false)
		return
	}
	p.arriveHeld(st, mine, true)
	// Released: the next checkpoint must not hold them, or a restart after
	// the end of input would release them a second time.
	for _, r := range mine {
		if err := st.backend.Delete(st.held, r.key); err != nil {
			st.holdErr = fmt.Errorf("dropping released results: %w", err)
			return
		}
	}
}

// arriveHeld adds a subtask's held results to the merge; the last subtask
// to arrive sends them all, sorted, and releases the others. A failed
// subtask does not wait (wait false): the input may never end, when its
// region restarts.
func (p *Pipeline) arriveHeld(st *subtask, mine []heldResult, wait bool) {
	hm := &p.merge
	hm.mu.Lock()
	hm.results = append(hm.results, mine...)
	hm.arrived++
	last := hm.arrived == len(p.subtasks)
	hm.mu.Unlock()
	if !last {
		if wait {
			<-hm.done
		}
		return
	}
	// Sort on what follows the key-group prefix: (end, key, start, firing).
	slices.SortFunc(hm.results, func(a, b heldResult) int { return bytes.Compare(a.key[2:], b.key[2:]) })
	if len(hm.results) > 0 {
		d := new(operators.Delivery)
		for _, r := range hm.results {
			d.AddRaw(r.value)
		}
		p.m.out.Add(d.Len())
		p.sendResults(st.epoch, d)
	}
	hm.results = nil
	close(hm.done)
}
