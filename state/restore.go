package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Restore tuning: entries travel from the reader to the writer in blocks of
// restoreBlock bytes, at most restoreAhead blocks ahead; a transaction
// commits after restoreTxBytes of blocks (its values live in the blocks
// until the commit).
const (
	restoreBlock   = 256 << 10
	restoreAhead   = 4
	restoreTxBytes = 4 << 20
)

// Restore implements Backend: the working file is discarded and rebuilt.
// While entries come in strictly increasing (bucket, key) order without
// deletions — a full checkpoint, the base of a chain — their pages are
// written straight into a new bbolt file (bulkLoader); from the first
// entry that breaks the order on (the increments), the file is opened with
// bbolt and entries are written in large batched transactions. Reading
// entries (decoding and verifying a checkpoint) runs in its own goroutine,
// one block ahead, so a restore can use two cores.
func (s *Bolt) Restore(entries Entries, opts RestoreOptions) error {
	if s.closed {
		return ErrClosed
	}
	if err := s.checkNoSnapshots("restore"); err != nil {
		return err
	}
	s.endRead()
	if s.db != nil { // nil after a restore that found the disk full
		if err := s.db.Close(); err != nil {
			return fmt.Errorf("state: restore: close working file: %w", err)
		}
	}
	s.gen++
	s.cache.clear()
	s.changes.reset()
	s.dropCold() // the entries go into the working file, tagged with cold reads
	s.keys = 0
	s.err = nil
	s.db = nil
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.closed = true
		return fmt.Errorf("state: restore: discard old working file: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		s.closed = true
		return fmt.Errorf("state: restore: create working file: %w", err)
	}
	bl, err := newBulkLoader(f, s.opts.MaxSize, func() error { return s.writeErr("restore", bolterrors.ErrMaxSizeReached) })
	if err != nil {
		f.Close()
		s.closed = true
		return err
	}
	err = s.load(bl, entries, opts)
	if s.db == nil && err != nil {
		// The file was never opened as a database: the backend cannot go
		// on until the next Restore.
		f.Close()
		if oerr := s.open(); oerr != nil {
			s.closeAfterFailedRestore(oerr)
		}
	}
	if err != nil {
		s.err = err
	}
	return err
}

// closeAfterFailedRestore handles a working file that cannot be opened
// again after a failed Restore (openErr): on a full file system (ENOSPC,
// EDQUOT) the partial file is removed and the backend waits, without a
// database, for the next Restore, which the caller retries once space
// frees; anything else closes the backend.
func (s *Bolt) closeAfterFailedRestore(openErr error) {
	if !errors.Is(openErr, syscall.ENOSPC) && !errors.Is(openErr, syscall.EDQUOT) {
		s.closed = true
		return
	}
	s.db = nil
	_ = os.Remove(s.path)
}

// endBulk finishes the bulk-loaded file and opens it with bbolt, for the
// entries that do not continue its order and for everything after.
func (s *Bolt) endBulk(bl *bulkLoader) error {
	err := bl.finish()
	if cerr := bl.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("state: restore: close %s: %w", s.path, cerr)
	}
	if err != nil {
		return err
	}
	s.keys = bl.keys
	if fi, err := os.Stat(s.path); err == nil {
		s.written += fi.Size() // the bulk loader writes each page once
	}
	if err := s.openFile(); err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	return nil
}

// errRestoreStopped tells the reader goroutine that the writer gave up.
var errRestoreStopped = errors.New("state: restore stopped")

// readAhead runs entries in a goroutine and delivers them in blocks, each an
// encoding of entries: flags (1: deleted) | uvarint lengths of bucket, key,
// value | the bytes. Blocks are reused through free. The error of entries
// (nil at the end) comes last on errc.
//
// With tagged, a live value is written with the cold reads' tag (cold.go).
func readAhead(entries Entries, tagged bool, blocks chan<- []byte, free <-chan []byte, stop <-chan struct{}, errc chan<- error) {
	var blk []byte
	next := func() bool {
		select {
		case blk = <-free:
			blk = blk[:0]
		default:
			blk = make([]byte, 0, restoreBlock)
		}
		return true
	}
	send := func() error {
		select {
		case blocks <- blk:
			blk = nil
			return nil
		case <-stop:
			return errRestoreStopped
		}
	}
	next()
	err := entries(func(bucket, key, value []byte, deleted bool) error {
		n := 1 + 3*binary.MaxVarintLen32 + len(bucket) + len(key) + len(value)
		if len(blk) > 0 && len(blk)+n > cap(blk) {
			if err := send(); err != nil {
				return err
			}
			next()
		}
		var flag byte
		if deleted {
			flag = 1
		}
		tag := tagged && !deleted
		blk = append(blk, flag)
		blk = binary.AppendUvarint(blk, uint64(len(bucket)))
		blk = binary.AppendUvarint(blk, uint64(len(key)))
		if tag {
			blk = binary.AppendUvarint(blk, uint64(1+len(value)))
		} else {
			blk = binary.AppendUvarint(blk, uint64(len(value)))
		}
		blk = append(blk, bucket...)
		blk = append(blk, key...)
		if tag {
			blk = append(blk, coldPut)
		}
		blk = append(blk, value...)
		return nil
	})
	if err == nil && len(blk) > 0 {
		err = send()
	}
	close(blocks)
	errc <- err
}

// load writes entries into the store as a reader goroutine decodes them
// ahead into blocks: bulk-loaded while they come in order, then through
// write transactions.
func (s *Bolt) load(bl *bulkLoader, entries Entries, opts RestoreOptions) error {
	blocks := make(chan []byte, restoreAhead)
	free := make(chan []byte, restoreTxBytes/restoreBlock+restoreAhead+1)
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go readAhead(entries, s.opts.ColdReads, blocks, free, stop, errc)

	l := &blockLoader{s: s, bl: bl, opts: opts, free: free}
	var err error
	for blk := range blocks {
		var used bool
		if used, err = l.apply(blk); err != nil {
			break
		}
		if !used {
			l.release(blk) // bulk loaded: copied into pages already
			continue
		}
		l.held = append(l.held, blk)
		if l.txBytes += cap(blk); l.txBytes >= restoreTxBytes {
			if err = l.commit(); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = <-errc
	} else {
		close(stop)
		for range blocks { // let the reader finish
		}
		<-errc
	}
	if err == nil && l.bl != nil {
		err = s.endBulk(l.bl)
	}
	if err != nil {
		if l.tx != nil {
			_ = l.tx.Rollback()
		}
		return fmt.Errorf("state: restore: %w", err)
	}
	if err := l.commit(); err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	s.keys = max(0, s.keys+l.extra)
	return nil
}

// blockLoader writes a restore's blocks into the store: into the bulk
// loader while the entries come in order and new, then through write
// transactions of about restoreTxBytes, which reference the blocks'
// values until they commit (bbolt copies keys at Put, values at commit).
type blockLoader struct {
	s    *Bolt
	bl   *bulkLoader // nil once the entries left the bulk loader's order
	opts RestoreOptions
	free chan<- []byte // blocks the reader may fill again

	tx      *bolt.Tx
	held    [][]byte // blocks whose values the open transaction references
	txBytes int      // their capacity
	extra   int      // keys added less keys deleted: an estimate (see keys)

	bk     *bolt.Bucket // the open transaction's bucket of the last entry
	bkName []byte

	keepName []byte       // the bucket of the previous entry
	keepKG   KeyGroupFunc // its key-group filter, nil to keep every entry
}

// release hands a block back to the reader, or drops it when the reader
// has enough.
func (l *blockLoader) release(b []byte) {
	select {
	case l.free <- b:
	default:
	}
}

// commit commits the open transaction, if any, and releases its blocks.
func (l *blockLoader) commit() error {
	if l.tx == nil {
		return nil
	}
	err := l.tx.Commit()
	if err == nil {
		l.s.committed(l.tx)
	}
	l.tx, l.txBytes = nil, 0
	for _, b := range l.held {
		l.release(b)
	}
	l.held = l.held[:0]
	if err != nil {
		return l.s.writeErr("restore commit", err)
	}
	return nil
}

// apply writes a block's entries; it reports whether the open transaction
// references the block.
func (l *blockLoader) apply(blk []byte) (bool, error) {
	used := false
	for len(blk) > 0 {
		var bucket, key, value []byte
		deleted := blk[0] == 1
		bucket, key, value, blk = splitEntry(blk[1:])
		keep, err := l.keep(bucket, key)
		if err != nil {
			return used, err
		}
		if !keep {
			continue
		}
		inTx, err := l.write(deleted, bucket, key, value)
		if err != nil {
			return used, err
		}
		used = used || inTx
	}
	return used, nil
}

// splitEntry cuts one entry (after its deleted flag: three uvarint
// lengths, then bucket, key and value) from the front of blk. The slices
// are capped so that appending to one cannot overwrite the next.
func splitEntry(blk []byte) (bucket, key, value, rest []byte) {
	var ln [3]uint64
	for i := range ln {
		v, n := binary.Uvarint(blk)
		ln[i], blk = v, blk[n:]
	}
	a, b, c := ln[0], ln[0]+ln[1], ln[0]+ln[1]+ln[2]
	return blk[:a:a], blk[a:b:b], blk[b:c:c], blk[c:]
}

// keep reports whether the entry belongs to the key groups being
// restored; a new bucket's filter is looked up once, not per entry.
func (l *blockLoader) keep(bucket, key []byte) (bool, error) {
	if string(bucket) != string(l.keepName) || l.keepName == nil {
		b, _, err := l.s.buckets.keep(bucket, key, l.opts)
		if err != nil {
			return false, err
		}
		l.keepName, l.keepKG = append(l.keepName[:0], bucket...), l.s.buckets.kgOf[b]
		if l.opts.KeyGroups == nil {
			l.keepKG = nil
		}
	}
	if l.keepKG != nil {
		if kg, ok := l.keepKG(key); ok && !l.opts.KeyGroups.Contains(kg) {
			return false, nil
		}
	}
	return true, nil
}

// write stores one entry: in the bulk loader while it takes them, else in
// the open write transaction (begun if none is); inTx reports the latter.
func (l *blockLoader) write(deleted bool, bucket, key, value []byte) (inTx bool, err error) {
	if l.bl != nil {
		if !deleted {
			ok, err := l.bl.add(bucket, key, value)
			if err != nil {
				return false, err
			}
			if ok {
				return false, nil
			}
		}
		if err := l.s.endBulk(l.bl); err != nil {
			return false, err
		}
		l.bl = nil
	}
	if l.tx == nil {
		if l.tx, err = l.s.db.Begin(true); err != nil {
			return false, fmt.Errorf("state: restore: begin write: %w", err)
		}
		l.bk, l.bkName = nil, nil
	}
	if l.bk == nil || string(l.bkName) != string(bucket) {
		if l.bk, err = l.tx.CreateBucketIfNotExists(bucket); err != nil {
			return false, l.s.writeErr("restore bucket", err)
		}
		l.bk.FillPercent = 1.0 // as the write-back does (flushBatch)
		l.bkName = append(l.bkName[:0], bucket...)
	}
	if deleted {
		err = l.bk.Delete(key)
		l.extra--
	} else {
		err = l.bk.Put(key, value) // bbolt copies the key; value stays in the block until commit
		l.extra++                  // mostly updates, but the count is an estimate (see keys)
	}
	if err != nil {
		return false, l.s.writeErr("restore write", err)
	}
	return true, nil
}
