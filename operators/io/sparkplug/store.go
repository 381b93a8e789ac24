package sparkplug

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"

	"github.com/eddy-edge/eddy/operators/io/walsink/wal"
	"github.com/eddy-edge/eddy/state/vfs"
)

// store keeps the results a Sink could not publish (the node not born: the
// broker or the primary host away) in a write-ahead log of package wal,
// the WAL sink's segment files, until they are published as historical;
// they are read back from the log in order, one at a time, so memory does
// not grow with what is held. It takes part in the checkpoint's two-phase
// commit like the WAL sink: results are appended unsynced as they come
// (epoch n, between checkpoints n-1 and n), synced at barrier n before the
// sink acknowledges it, and Recover(c) discards the held results of epochs
// after the restored checkpoint c, which replay computes again. So a held
// result of a completed checkpoint survives a crash, and none is held
// twice.
//
// Every result gets a sequence number (seq) when written. Records (the
// first payload byte is the kind; integers are uvarints unless said
// otherwise):
//
//	kind 1 state   version u8 (1), nextSeq, floor: written first in every segment
//	kind 2 names   id, n, n × (len, bytes): the aggregate names of later
//	               results in the same segment
//	kind 3 result  epoch, seq, names id, timestamp ms (varint), key len,
//	               key, n, n × float64 (LE)
//	kind 4 abort   from, to: the held results of seqs from..to are
//	               discarded (Recover: their epochs follow the restored
//	               checkpoint)
//	kind 5 done    floor: every seq ≤ floor is published, dropped or discarded
//
// A segment other than the active one is deleted once every result in it
// is ≤ floor. When the log would pass maxBytes the oldest segment's results
// are dropped (counted) and the segment deleted: the newest results are
// the ones a host is missing most recently.
type store struct {
	log      *wal.Log
	maxBytes int64
	segBytes int64

	nextSeq uint64
	floor   uint64 // every seq ≤ floor is published, dropped or discarded
	// recorded is the floor the log says (the last done record's).
	recorded uint64
	// aborted are the discarded seq ranges above floor, ascending.
	aborted []seqRange
	// epochs are the first seq of each epoch among the held results,
	// ascending, for Recover.
	epochs []epochStart
	segMax map[uint64]uint64 // segment → its highest result seq
	names  map[namesKey]uint64
	nextID uint64
	buf    []byte
	dirty  bool // written since the last sync

	// The reading side: rd reads segment rdSeg; cur is the oldest held
	// result when curOK.
	rd      *wal.Reader
	rdSeg   uint64
	rdNames map[uint64][]string
	cur     held
	curOK   bool
	key     []byte
	vals    []float64

	// replay only
	replayNames map[uint64]bool
	replaySeg   uint64
}

type seqRange struct{ from, to uint64 }

// namesKey identifies a pipeline's aggregate names without reading them:
// they are one slice for the pipeline's life.
type namesKey struct {
	p *string
	n int
}

type epochStart struct{ epoch, seq uint64 }

// held is a held result read back; its key and values are store.key and
// store.vals.
type held struct {
	seq   uint64
	names []string
	tsMs  int64
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
	s := &store{maxBytes: maxBytes, segBytes: max(maxBytes/8, 64<<10), segMax: map[uint64]uint64{},
		names: map[namesKey]uint64{}, rdNames: map[uint64][]string{}, replayNames: map[uint64]bool{}, nextSeq: 1}
	l, err := wal.Open(fsys, dir, s.replay)
	if err != nil {
		return nil, fmt.Errorf("sparkplug: store %s: %w", dir, err)
	}
	s.log, s.replayNames = l, nil
	s.nextSeq = max(s.nextSeq, s.floor+1)
	s.recorded = s.floor
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
		s.replayNames[r.uvarint()] = true
	case recResult:
		epoch, seq, id := r.uvarint(), r.uvarint(), r.uvarint()
		if r.err == nil && !s.replayNames[id] {
			return fmt.Errorf("%w: names %d unknown", errStoreRecord, id)
		}
		s.segMax[seg] = seq
		s.nextSeq = max(s.nextSeq, seq+1)
		if seq > s.floor {
			s.noteEpoch(epoch, seq)
		}
	case recAbort:
		s.abort(r.uvarint(), r.uvarint())
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
func (s *store) Len() int {
	if s.floor+1 >= s.nextSeq {
		return 0
	}
	n := s.nextSeq - 1 - s.floor
	for _, a := range s.aborted {
		n -= a.to - a.from + 1
	}
	return int(n)
}

// Bytes is the log's size on disk.
func (s *store) Bytes() int64 { return s.log.Size() }

// first returns the oldest held result, read back from the log; key and
// values are valid until the next call that changes the store. It fails
// with io.EOF when none is held.
func (s *store) first() (h *held, key []byte, values []float64, err error) {
	if !s.curOK {
		if err := s.readNext(); err != nil {
			return nil, nil, nil, err
		}
	}
	return &s.cur, s.key, s.vals, nil
}

// readNext reads the log on from where it was up to the next held result.
func (s *store) readNext() error {
	if s.Len() == 0 {
		return io.EOF
	}
	for {
		if s.rd == nil {
			if err := s.openNextSegment(); err != nil {
				return err
			}
		}
		p, err := s.rd.Next()
		if errors.Is(err, io.EOF) {
			if a, _ := s.log.Active(); a.ID == s.rdSeg {
				return fmt.Errorf("sparkplug: store: %d results held but none left to read in the log", s.Len())
			}
			s.rd.Close()
			s.rd = nil
			continue
		}
		if err != nil {
			return err
		}
		r := reader{b: p[1:]}
		switch p[0] {
		case recNames:
			id, n := r.uvarint(), r.uvarint()
			if n > uint64(len(r.b)) {
				return errStoreRecord
			}
			names := make([]string, n)
			for i := range names {
				names[i] = string(r.bytes())
			}
			s.rdNames[id] = names
		case recResult:
			_, seq, id := r.uvarint(), r.uvarint(), r.uvarint()
			ts := r.varint()
			key := r.bytes()
			n := r.uvarint()
			if r.err != nil || n*8 != uint64(len(r.b)) {
				return errStoreRecord
			}
			if !s.isHeld(seq) {
				continue
			}
			s.cur = held{seq: seq, names: s.rdNames[id], tsMs: ts}
			s.key = append(s.key[:0], key...)
			s.vals = s.vals[:0]
			for i := range int(n) {
				s.vals = append(s.vals, math.Float64frombits(binary.LittleEndian.Uint64(r.b[8*i:])))
			}
			s.curOK = true
			return nil
		}
		if r.err != nil {
			return errStoreRecord
		}
	}
}

// openNextSegment opens the oldest segment after the one read last.
func (s *store) openNextSegment() error {
	for _, sg := range s.log.Segments() {
		if sg.ID <= s.rdSeg {
			continue
		}
		rd, err := s.log.OpenReader(sg.ID, 0)
		if err != nil {
			return err
		}
		s.rd, s.rdSeg = rd, sg.ID
		clear(s.rdNames)
		return nil
	}
	return fmt.Errorf("sparkplug: store: %d results held but no segment left to read", s.Len())
}

// isHeld reports whether seq is neither ≤ floor nor discarded.
func (s *store) isHeld(seq uint64) bool {
	if seq <= s.floor || seq >= s.nextSeq {
		return false
	}
	for _, a := range s.aborted {
		if seq >= a.from && seq <= a.to {
			return false
		}
	}
	return true
}

// pop takes the oldest held result, which first returned, as published.
func (s *store) pop() {
	s.curOK = false
	s.setFloor(s.cur.seq)
}

// noteEpoch records that held seq is of epoch.
func (s *store) noteEpoch(epoch, seq uint64) {
	if n := len(s.epochs); n == 0 || s.epochs[n-1].epoch != epoch {
		s.epochs = append(s.epochs, epochStart{epoch, seq})
	}
}

// add appends a result of epoch to the batch being written (flush writes it).
func (s *store) add(epoch uint64, key []byte, names []string, values []float64, tsMs int64) {
	var id uint64
	if len(names) > 0 {
		p := namesKey{unsafe.SliceData(names), len(names)}
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
	s.noteEpoch(epoch, seq)
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
		before := s.Len()
		s.setFloor(s.segMax[oldest])
		dropped += before - s.Len()
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

// markDone records the floor, unsynced: a crash of the process keeps it
// in the page cache; a power cut may lose it, and the results published
// since the last one are published again after the restart.
func (s *store) markDone() error {
	if s.floor == s.recorded {
		return nil
	}
	s.recorded = s.floor
	start := len(s.buf)
	s.buf = append(wal.BeginFrame(s.buf), recDone)
	s.buf = binary.AppendUvarint(s.buf, s.floor)
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

// abort discards the held seqs from..to.
func (s *store) abort(from, to uint64) {
	from = max(from, s.floor+1)
	to = min(to, s.nextSeq-1)
	if from > to {
		return
	}
	if s.curOK && s.cur.seq >= from {
		s.curOK = false
	}
	s.aborted = append(s.aborted, seqRange{from, to})
	for len(s.epochs) > 0 && s.epochs[len(s.epochs)-1].seq >= from {
		s.epochs = s.epochs[:len(s.epochs)-1]
	}
	s.setFloor(s.floor)
}

// recover discards the held results of epochs after the restored
// checkpoint last, durably before replay writes them again. Epochs never
// decrease along the log, so they are the newest.
func (s *store) recover(last uint64) (int, error) {
	before := s.Len()
	for _, e := range s.epochs {
		if e.epoch <= last {
			continue
		}
		from, to := e.seq, s.nextSeq-1
		s.abort(from, to)
		start := len(s.buf)
		s.buf = append(wal.BeginFrame(s.buf), recAbort)
		s.buf = binary.AppendUvarint(s.buf, from)
		s.buf = binary.AppendUvarint(s.buf, to)
		s.buf = wal.EndFrame(s.buf, start)
		if err := s.log.Write(s.buf); err != nil {
			return 0, err
		}
		s.buf = s.buf[:0]
		if err := s.log.Sync(); err != nil {
			return 0, err
		}
		break
	}
	return before - s.Len(), s.published()
}

// rotate starts a new segment with a state record; names are interned
// afresh in it.
func (s *store) rotate() error {
	var b []byte
	b = append(wal.BeginFrame(b), recState, storeVersion)
	b = binary.AppendUvarint(b, s.nextSeq)
	b = binary.AppendUvarint(b, s.floor)
	b = wal.EndFrame(b, 0)
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

// setFloor raises the floor to f, and over the discarded ranges right
// above it; what falls below it is forgotten.
func (s *store) setFloor(f uint64) {
	s.floor = max(s.floor, f)
	for len(s.aborted) > 0 {
		a := s.aborted[0]
		switch {
		case a.to <= s.floor:
		case a.from <= s.floor+1:
			s.floor = a.to
		default:
			s.trimEpochs()
			return
		}
		s.aborted = s.aborted[1:]
	}
	s.trimEpochs()
}

// trimEpochs forgets the epochs wholly at or below the floor.
func (s *store) trimEpochs() {
	for len(s.epochs) > 1 && s.epochs[1].seq <= s.floor+1 {
		s.epochs = s.epochs[1:]
	}
	if len(s.epochs) == 1 && s.floor+1 >= s.nextSeq {
		s.epochs = s.epochs[:0]
	}
	if s.curOK && s.cur.seq <= s.floor {
		s.curOK = false
	}
}

func (s *store) close() error {
	if s.rd != nil {
		s.rd.Close()
		s.rd = nil
	}
	return s.log.Close()
}

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

// varint reads what binary.AppendVarint wrote: a zigzag uvarint.
func (r *reader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
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
