package checkpoint

import (
	"fmt"
	"slices"
)

// Aligner aligns checkpoint barriers at a task with several inputs (a
// key-by fan-in or a union); docs/architecture.md "Checkpoints" step 2. It is a pure
// helper: the task feeds it the barriers and end-of-input events it reads,
// asks Blocked before reading an input, and acts on the returned Decision.
//
// In ExactlyOnce mode an input that delivered barrier n is blocked (the task
// must not read it) until every input has delivered n or ended; then the
// Decision says snapshot n, forward barrier n, and read every input again.
// Records that arrive on an input before its barrier belong to checkpoint n;
// those held back behind it belong to n+1, so the snapshot is exactly the
// state after the records before n.
//
// In AtLeastOnce mode no input is ever blocked: the snapshot is taken when
// the last input delivers n, and records read after n on a faster input are
// in the snapshot and are processed again after a restore.
//
// A newer barrier supersedes an older alignment: in ExactlyOnce mode barrier
// n+1 on any input aborts n at once (that input can never deliver n, as
// barriers keep their order on a channel); in AtLeastOnce mode n is aborted
// when n+1 completes first, as Flink's barrier tracker does. Barriers of an
// aborted or completed checkpoint that arrive late are ignored.
//
// An ended input counts as aligned for every later barrier. The zero value
// is not usable; an Aligner is not safe for concurrent use.
type Aligner struct {
	mode    Mode
	ended   []bool
	nEnded  int
	pending []*alignment // ascending ids; at most one in ExactlyOnce mode
	free    []*alignment
	last    uint64 // newest checkpoint snapshotted or aborted here
	aborted []uint64
}

type alignment struct {
	id   uint64
	seen []bool
	n    int
}

// Decision is what the task must do after a barrier or end of input.
type Decision struct {
	// Snapshot, if non-zero, is the checkpoint to snapshot now: take the
	// snapshot (a consistent view of the state), forward barrier Snapshot on
	// every output, and acknowledge it once the snapshot is durable.
	Snapshot uint64
	// Aborted lists checkpoints abandoned at this task, oldest first: decline
	// them to the coordinator. The slice is valid until the next call.
	Aborted []uint64
}

// NewAligner returns an Aligner for a task with inputs inputs (at least 1).
func NewAligner(mode Mode, inputs int) *Aligner {
	if inputs < 1 || (mode != ExactlyOnce && mode != AtLeastOnce) {
		panic(fmt.Sprintf("checkpoint: NewAligner(%v, %d)", mode, inputs))
	}
	return &Aligner{mode: mode, ended: make([]bool, inputs)}
}

// Blocked reports whether the task must not read input i now: in
// ExactlyOnce mode, i delivered the barrier being aligned. Always false in
// AtLeastOnce mode.
func (a *Aligner) Blocked(i int) bool {
	return a.mode == ExactlyOnce && len(a.pending) > 0 && a.pending[0].seen[i]
}

// Aligning returns the checkpoint whose barriers are being aligned (the
// oldest one in AtLeastOnce mode), or 0.
func (a *Aligner) Aligning() uint64 {
	if len(a.pending) == 0 {
		return 0
	}
	return a.pending[0].id
}

// Barrier records barrier id read from input i. A barrier read from a
// blocked or ended input, or twice from one input, is a bug in the caller
// and panics.
func (a *Aligner) Barrier(i int, id uint64) Decision {
	if a.ended[i] || a.Blocked(i) {
		panic(fmt.Sprintf("checkpoint: barrier %d read from input %d, which is ended (%v) or blocked", id, i, a.ended[i]))
	}
	a.aborted = a.aborted[:0]
	if id <= a.last {
		return Decision{}
	}
	if a.mode == ExactlyOnce && len(a.pending) > 0 && a.pending[0].id < id {
		a.abortThrough(a.pending[0].id)
	}
	al := a.find(id)
	if al.seen[i] {
		panic(fmt.Sprintf("checkpoint: barrier %d read twice from input %d", id, i))
	}
	al.seen[i] = true
	al.n++
	return a.check()
}

// EndOfInput records that input i will deliver nothing more. It counts as
// aligned for every pending and later barrier.
func (a *Aligner) EndOfInput(i int) Decision {
	a.aborted = a.aborted[:0]
	if a.ended[i] {
		return Decision{}
	}
	a.ended[i] = true
	a.nEnded++
	return a.check()
}

// find returns the pending alignment of id, creating it in order.
func (a *Aligner) find(id uint64) *alignment {
	k, found := slices.BinarySearchFunc(a.pending, id, func(al *alignment, id uint64) int {
		switch {
		case al.id < id:
			return -1
		case al.id > id:
			return 1
		}
		return 0
	})
	if found {
		return a.pending[k]
	}
	var al *alignment
	if n := len(a.free); n > 0 {
		al, a.free = a.free[n-1], a.free[:n-1]
		clear(al.seen)
	} else {
		al = &alignment{seen: make([]bool, len(a.ended))}
	}
	al.id, al.n = id, 0
	a.pending = slices.Insert(a.pending, k, al)
	return al
}

// check completes the newest alignment that every input has reached,
// aborting older ones.
func (a *Aligner) check() Decision {
	for k := len(a.pending) - 1; k >= 0; k-- {
		al := a.pending[k]
		n := al.n
		for i, e := range a.ended {
			if e && !al.seen[i] {
				n++
			}
		}
		if n == len(a.ended) {
			id := al.id
			a.abortThrough(id - 1)
			a.remove(0) // al is now the oldest
			a.last = id
			return Decision{Snapshot: id, Aborted: a.aborted}
		}
	}
	return Decision{Aborted: a.aborted}
}

// abortThrough aborts every pending alignment with an id ≤ id.
func (a *Aligner) abortThrough(id uint64) {
	for len(a.pending) > 0 && a.pending[0].id <= id {
		a.aborted = append(a.aborted, a.pending[0].id)
		a.last = max(a.last, a.pending[0].id)
		a.remove(0)
	}
}

func (a *Aligner) remove(k int) {
	a.free = append(a.free, a.pending[k])
	a.pending = slices.Delete(a.pending, k, k+1)
}
