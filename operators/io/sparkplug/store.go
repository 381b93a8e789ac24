package sparkplug

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
	"github.com/eddy-edge/eddy/state/vfs"
)

// store keeps the results a Sink could not publish (the node not born: the
// broker or the primary host away) in a write-ahead log of package wal,
// the WAL sink's segment files, and in memory in the same order, until
// they are published as historical. It takes part in the checkpoint's
// two-phase commit like the WAL sink: results are appended unsynced as they
// come (epoch n, between checkpoints n-1 and n), synced at barrier n before
// the sink acknowledges it, and Recover(c) discards the held results of
// epochs after the restored checkpoint c, which replay computes again. So a
// held result of a completed checkpoint survives a crash, and none is held
// twice.
//
// Records (the first payload byte is the kind; integers are uvarints
// unless said otherwise):
//
//	kind 1 state   version u8 (1), nextSeq, floor: written first in every segment
//	kind 2 names   id, n, n × (len, bytes): the aggregate names of later
//	               results in the same segment
//	kind 3 result  epoch, seq, names id, timestamp ms (varint), key len,
//	               key, n, n × float64 (LE)
//	kind 4 abort   last: held results of epochs after last are discarded (Recover)
//	kind 5 done    floor: every seq ≤ floor is published, dropped or discarded
//
// A segment other than the active one is deleted once every result in it
// is ≤ floor. When the log would pass maxBytes the oldest segment's results
// are dropped (counted) and the segment deleted: the newest results are
// the ones a host is missing most recently.
type store struct {
	fs       vfs.FS
	log      *wal.Log
	maxBytes int64
	segBytes int64

	q       []held // q[head:] are held, oldest first
	head    int
	keys    []byte    // arena of q's keys
	vals    []float64 // arena of q's values
	nextSeq uint64
	floor   uint64
	segMax  map[uint64]uint64 // segment → its highest result seq
	names   map[*string]uint64
	nextID  uint64
	buf     []byte
	dirty   bool // written since the last sync

	dropped uint64
	// replay only
	replayNames map[uint64][]string
	replaySeg   uint64
}

// held is one result in the store; its key and values are in the arenas.
type held struct {
	seq, epoch uint64
	names      []string
	tsMs       int64
	kOff, kLen int
	vOff, vLen int
}

const (
	recState  = 1
	recNames  = 2
	recResult = 3
	recAbort  = 4
	recDone   = 5

	storeVersion = 1
)

var errStoreRecord = errors.New("sparkplug: store: malformed record")

// openStore opens (creating) the store in dir and reads back what it holds.
func openStore(fsys vfs.FS, dir string, maxBytes int64) (*store, error) {
	s := &store{fs: fsys, maxBytes: maxBytes, segBytes: max(maxBytes/8, 64<<10), segMax: map[uint64]uint64{},
		names: map[*string]uint64{}, replayNames: map[uint64][]string{}, nextSeq: 1}
	l, err := wal.Open(fsys, dir, s.replay)
	if err != nil {
		return nil, fmt.Errorf("sparkplug: store %s: %w", dir, err)
	}
	s.log, s.replayNames = l, nil
	if s.floor+1 > s.nextSeq {
		s.nextSeq = s.floor + 1
	}
	// A new segment even when one is active: this run's results intern
	// their names afresh, and the ids of the active segment's are taken.
	if err := s.rotate(); err != nil {
		l.Close()
		return nil, err
	}
	if err := s.removeDone(); err != nil {
		l.Close()
		return nil, err
	}
	return s, nil
}

// replay applies one record read back at open.
func (s *store) replay(seg uint64, p []byte) error {
	if seg != s.replaySeg {
		s.replaySeg = seg
		clear(s.replayNames)
		s.segMax[seg] = 0
	}
	if len(p) == 0 {
		return errStoreRecord
	}
	r := reader{b: p[1:]}
	switch p[0] {
	case recState:
		if v := r.byte(); v != storeVersion && r.err == nil {
			return fmt.Errorf("sparkplug: store record version %d, this build reads %d", v, storeVersion)
		}
		s.nextSeq = max(s.nextSeq, r.uvarint())
		s.setFloor(r.uvarint())
	case recNames:
		id, n := r.uvarint(), r.uvarint()
		if n > uint64(len(r.b)) {
			return errStoreRecord
		}
		names := make([]string, n)
		for i := range names {
			names[i] = string(r.bytes())
		}
		s.replayNames[id] = names
	case recResult:
		epoch, seq, id := r.uvarint(), r.uvarint(), r.uvarint()
		ts := r.varint()
		key := r.bytes()
		n := r.uvarint()
		if r.err != nil || n*8 != uint64(len(r.b)) {
			return errStoreRecord
		}
		names, ok := s.replayNames[id]
		if !ok {
			return fmt.Errorf("%w: names %d unknown", errStoreRecord, id)
		}
		s.segMax[seg] = seq
		s.nextSeq = max(s.nextSeq, seq+1)
		if seq <= s.floor {
			return nil
		}
		h := held{seq: seq, epoch: epoch, names: names, tsMs: ts, kOff: len(s.keys), kLen: len(key), vOff: len(s.vals), vLen: int(n)}
		s.keys = append(s.keys, key...)
		for i := range int(n) {
			s.vals = append(s.vals, math.Float64frombits(binary.LittleEndian.Uint64(r.b[8*i:])))
		}
		s.q = append(s.q, h)
	case recAbort:
		s.discardAfter(r.uvarint())
	case recDone:
		s.setFloor(r.uvarint())
	default:
		return fmt.Errorf("%w: kind %d", errStoreRecord, p[0])
	}
	if r.err != nil {
		return errStoreRecord
	}
	return nil
}

// Len is the number of results held.
func (s *store) Len() int { return len(s.q) - s.head }

// Bytes is the log's size on disk.
func (s *store) Bytes() int64 { return s.log.Size() }

// first returns the oldest held result's parts, valid until the next call
// that changes the store.
func (s *store) first() (h *held, key []byte, values []float64) {
	h = &s.q[s.head]
	return h, s.keys[h.kOff : h.kOff+h.kLen], s.vals[h.vOff : h.vOff+h.vLen]
}

// pop removes the oldest held result (published).
func (s *store) pop() {
	s.q[s.head] = held{}
	s.head++
	if s.head == len(s.q) {
		s.q, s.head, s.keys, s.vals = s.q[:0], 0, s.keys[:0], s.vals[:0]
	} else if s.head > 1024 && s.head*2 > len(s.q) {
		s.compact()
	}
}

// compact moves the held results to the front of q and the arenas.
func (s *store) compact() {
	k0, v0 := s.q[s.head].kOff, s.q[s.head].vOff
	n := copy(s.q, s.q[s.head:])
	clear(s.q[n:])
	s.q, s.head = s.q[:n], 0
	for i := range s.q {
		s.q[i].kOff -= k0
		s.q[i].vOff -= v0
	}
	s.keys = s.keys[:copy(s.keys, s.keys[k0:])]
	s.vals = s.vals[:copy(s.vals, s.vals[v0:])]
}

// add appends a result of epoch to the batch being written (flush writes it).
func (s *store) add(epoch uint64, key []byte, names []string, values []float64, tsMs int64) {
	var id uint64
	if len(names) > 0 {
		p := unsafe.SliceData(names)
		var ok bool
		if id, ok = s.names[p]; !ok {
			s.nextID++
			id = s.nextID
			s.names[p] = id
			start := len(s.buf)
			s.buf = append(wal.BeginFrame(s.buf), recNames)
			s.buf = binary.AppendUvarint(s.buf, id)
			s.buf = binary.AppendUvarint(s.buf, uint64(len(names)))
			for _, n := range names {
				s.buf = binary.AppendUvarint(s.buf, uint64(len(n)))
				s.buf = append(s.buf, n...)
			}
			s.buf = wal.EndFrame(s.buf, start)
		}
	}
	seq := s.nextSeq
	s.nextSeq++
	start := len(s.buf)
	s.buf = append(wal.BeginFrame(s.buf), recResult)
	s.buf = binary.AppendUvarint(s.buf, epoch)
	s.buf = binary.AppendUvarint(s.buf, seq)
	s.buf = binary.AppendUvarint(s.buf, id)
	s.buf = binary.AppendVarint(s.buf, tsMs)
	s.buf = binary.AppendUvarint(s.buf, uint64(len(key)))
	s.buf = append(s.buf, key...)
	s.buf = binary.AppendUvarint(s.buf, uint64(len(values)))
	for _, v := range values {
		s.buf = binary.LittleEndian.AppendUint64(s.buf, math.Float64bits(v))
	}
	s.buf = wal.EndFrame(s.buf, start)
	s.q = append(s.q, held{seq: seq, epoch: epoch, names: names, tsMs: tsMs,
		kOff: len(s.keys), kLen: len(key), vOff: len(s.vals), vLen: len(values)})
	s.keys = append(s.keys, key...)
	s.vals = append(s.vals, values...)
	if a, ok := s.log.Active(); ok {
		s.segMax[a.ID] = seq
	}
}

// flush writes the batch add built, unsynced, then keeps the log within
// maxBytes. It returns how many held results it dropped for room.
func (s *store) flush() (dropped int, err error) {
	if len(s.buf) == 0 {
		return 0, nil
	}
	if err := s.log.Write(s.buf); err != nil {
		return 0, err
	}
	s.buf, s.dirty = s.buf[:0], true
	if a, ok := s.log.Active(); ok && a.Size > s.segBytes {
		if err := s.rotate(); err != nil {
			return 0, err
		}
	}
	for s.log.Size() > s.maxBytes {
		segs := s.log.Segments()
		if len(segs) < 2 {
			break
		}
		oldest := segs[0].ID
		until := s.segMax[oldest]
		n := 0
		for s.Len() > 0 && s.q[s.head].seq <= until {
			s.pop()
			n++
		}
		dropped += n
		s.dropped += uint64(n)
		if err := s.markDone(); err != nil {
			return dropped, err
		}
		if err := s.removeSeg(oldest); err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// sync makes what was written durable (at a checkpoint's barrier).
func (s *store) sync() error {
	if !s.dirty {
		return nil
	}
	s.dirty = false
	return s.log.Sync()
}

// markDone records the floor below the oldest held result (not synced: a
// crash of the process keeps it in the page cache; power loss may publish
// the last batch again) and deletes the segments it frees.
func (s *store) markDone() error {
	f := s.nextSeq - 1
	if s.Len() > 0 {
		f = s.q[s.head].seq - 1
	}
	if f == s.floor {
		return nil
	}
	s.floor = f
	start := len(s.buf)
	s.buf = append(wal.BeginFrame(s.buf), recDone)
	s.buf = binary.AppendUvarint(s.buf, f)
	s.buf = wal.EndFrame(s.buf, start)
	if err := s.log.Write(s.buf); err != nil {
		return err
	}
	s.buf, s.dirty = s.buf[:0], true
	return nil
}

// published records that the results popped since the last call are out,
// and deletes the segments that frees; a store left empty starts a new
// segment so that the old one can go.
func (s *store) published() error {
	if err := s.markDone(); err != nil {
		return err
	}
	if a, ok := s.log.Active(); ok && s.Len() == 0 && a.Size > s.segBytes/4 {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	return s.removeDone()
}

// discardAfter drops the held results of epochs after last, which are at
// the end (epochs never decrease along the log).
func (s *store) discardAfter(last uint64) int {
	n := 0
	for s.Len() > 0 && s.q[len(s.q)-1].epoch > last {
		s.q[len(s.q)-1] = held{}
		s.q = s.q[:len(s.q)-1]
		n++
	}
	if s.Len() == 0 {
		s.q, s.head, s.keys, s.vals = s.q[:0], 0, s.keys[:0], s.vals[:0]
	}
	return n
}

// recover discards the held results of epochs after the restored
// checkpoint last, durably before replay writes them again.
func (s *store) recover(last uint64) (int, error) {
	n := s.discardAfter(last)
	start := len(s.buf)
	s.buf = append(wal.BeginFrame(s.buf), recAbort)
	s.buf = binary.AppendUvarint(s.buf, last)
	s.buf = wal.EndFrame(s.buf, start)
	if err := s.log.Write(s.buf); err != nil {
		return n, err
	}
	s.buf = s.buf[:0]
	if err := s.log.Sync(); err != nil {
		return n, err
	}
	return n, s.published()
}

// rotate starts a new segment with a state record; names are interned
// afresh in it.
func (s *store) rotate() error {
	var b []byte
	start := len(b)
	b = append(wal.BeginFrame(b), recState, storeVersion)
	b = binary.AppendUvarint(b, s.nextSeq)
	b = binary.AppendUvarint(b, s.floor)
	b = wal.EndFrame(b, start)
	id, err := s.log.Rotate(b)
	if err != nil {
		return err
	}
	s.segMax[id] = 0
	clear(s.names)
	return nil
}

// removeDone deletes the segments, other than the active one, whose
// results are all ≤ floor.
func (s *store) removeDone() error {
	segs := s.log.Segments()
	for _, sg := range segs[:max(len(segs)-1, 0)] {
		if s.segMax[sg.ID] > s.floor {
			break
		}
		if err := s.removeSeg(sg.ID); err != nil {
			return err
		}
	}
	return nil
}

func (s *store) removeSeg(id uint64) error {
	delete(s.segMax, id)
	return s.log.Remove(id)
}

func (s *store) setFloor(f uint64) {
	s.floor = max(s.floor, f)
	for s.Len() > 0 && s.q[s.head].seq <= s.floor {
		s.pop()
	}
}

func (s *store) close() error { return s.log.Close() }

// reader decodes a record's fields, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = errStoreRecord
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errStoreRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errStoreRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errStoreRecord
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}
