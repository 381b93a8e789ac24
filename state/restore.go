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
func readAhead(entries Entries, blocks chan<- []byte, free <-chan []byte, stop <-chan struct{}, errc chan<- error) {
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
		blk = append(blk, flag)
		blk = binary.AppendUvarint(blk, uint64(len(bucket)))
		blk = binary.AppendUvarint(blk, uint64(len(key)))
		blk = binary.AppendUvarint(blk, uint64(len(value)))
		blk = append(blk, bucket...)
		blk = append(blk, key...)
		blk = append(blk, value...)
		return nil
	})
	if err == nil && len(blk) > 0 {
		err = send()
	}
	close(blocks)
	errc <- err
}

func (s *Bolt) load(bl *bulkLoader, entries Entries, opts RestoreOptions) error {
	blocks := make(chan []byte, restoreAhead)
	free := make(chan []byte, restoreTxBytes/restoreBlock+restoreAhead+1)
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go readAhead(entries, blocks, free, stop, errc)
	release := func(b []byte) {
		select {
		case free <- b:
		default:
		}
	}

	var tx *bolt.Tx
	var held [][]byte // blocks whose values the open transaction references
	txBytes, extra := 0, 0
	commit := func() error {
		if tx == nil {
			return nil
		}
		err := tx.Commit()
		tx, txBytes = nil, 0
		for _, b := range held {
			release(b)
		}
		held = held[:0]
		if err != nil {
			return s.writeErr("restore commit", err)
		}
		return nil
	}
	var bk *bolt.Bucket
	var bkName []byte
	var keepName []byte     // the bucket of the previous entry
	var keepKG KeyGroupFunc // its key-group filter, nil to keep every entry
	// apply writes a block's entries; it reports whether the open
	// transaction references the block.
	apply := func(blk []byte) (bool, error) {
		used := false
		for len(blk) > 0 {
			deleted := blk[0] == 1
			blk = blk[1:]
			var ln [3]uint64
			for i := range ln {
				v, n := binary.Uvarint(blk)
				ln[i], blk = v, blk[n:]
			}
			bucket := blk[:ln[0]:ln[0]]
			key := blk[ln[0] : ln[0]+ln[1] : ln[0]+ln[1]]
			value := blk[ln[0]+ln[1] : ln[0]+ln[1]+ln[2] : ln[0]+ln[1]+ln[2]]
			blk = blk[ln[0]+ln[1]+ln[2]:]
			if string(bucket) != string(keepName) || keepName == nil {
				// A new bucket: look up how to filter it once, not per entry.
				b, _, err := s.buckets.keep(bucket, key, opts)
				if err != nil {
					return used, err
				}
				keepName, keepKG = append(keepName[:0], bucket...), s.buckets.kgOf[b]
				if opts.KeyGroups == nil {
					keepKG = nil
				}
			}
			if keepKG != nil {
				if kg, ok := keepKG(key); ok && !opts.KeyGroups.Contains(kg) {
					continue
				}
			}
			var err error
			if bl != nil {
				if !deleted {
					ok, err := bl.add(bucket, key, value)
					if err != nil {
						return used, err
					}
					if ok {
						continue
					}
				}
				if err := s.endBulk(bl); err != nil {
					return used, err
				}
				bl = nil
			}
			if tx == nil {
				if tx, err = s.db.Begin(true); err != nil {
					return used, fmt.Errorf("state: restore: begin write: %w", err)
				}
				bk, bkName = nil, nil
			}
			if bk == nil || string(bkName) != string(bucket) {
				if bk, err = tx.CreateBucketIfNotExists(bucket); err != nil {
					return used, s.writeErr("restore bucket", err)
				}
				bkName = append(bkName[:0], bucket...)
			}
			if deleted {
				err = bk.Delete(key)
				extra--
			} else {
				err = bk.Put(key, value) // bbolt copies the key; value stays in the block until commit
				extra++                  // mostly updates, but the count is an estimate (see keys)
			}
			if err != nil {
				return used, s.writeErr("restore write", err)
			}
			used = true
		}
		return used, nil
	}
	var err error
	for blk := range blocks {
		var used bool
		if used, err = apply(blk); err != nil {
			break
		}
		if !used {
			release(blk) // bulk loaded: copied into pages already
			continue
		}
		held = append(held, blk)
		if txBytes += cap(blk); txBytes >= restoreTxBytes {
			if err = commit(); err != nil {
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
	if err == nil && bl != nil {
		err = s.endBulk(bl)
	}
	if err != nil {
		if tx != nil {
			_ = tx.Rollback()
		}
		return fmt.Errorf("state: restore: %w", err)
	}
	if err := commit(); err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	s.keys = max(0, s.keys+extra)
	return nil
}
