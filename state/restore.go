package state

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
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

// Restore implements Backend: the working file is discarded and recreated,
// then entries are written in large batched transactions. Reading entries
// (decoding and verifying a checkpoint) runs in its own goroutine, one step
// ahead of the bbolt writes, so a restore can use two cores. The buckets are
// filled to 100% (the entries of a checkpoint come in key order), which
// makes the rebuilt file smaller and later writes split pages sooner.
func (s *Bolt) Restore(entries Entries, opts RestoreOptions) error {
	if s.closed {
		return ErrClosed
	}
	if err := s.checkNoSnapshots("restore"); err != nil {
		return err
	}
	s.endRead()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("state: restore: close working file: %w", err)
	}
	s.gen++
	s.cache.clear()
	s.changes.reset()
	s.keys = 0
	s.err = nil
	if err := s.open(); err != nil {
		s.closed = true
		return fmt.Errorf("state: restore: %w", err)
	}
	err := s.load(entries, opts)
	if err != nil {
		s.err = err
	}
	return err
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

func (s *Bolt) load(entries Entries, opts RestoreOptions) error {
	blocks := make(chan []byte, restoreAhead)
	free := make(chan []byte, restoreTxBytes/restoreBlock+restoreAhead+1)
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go readAhead(entries, blocks, free, stop, errc)

	var tx *bolt.Tx
	var held [][]byte // blocks whose values the open transaction references
	txBytes := 0
	commit := func() error {
		if tx == nil {
			return nil
		}
		err := tx.Commit()
		tx, txBytes = nil, 0
		for _, b := range held {
			select {
			case free <- b:
			default:
			}
		}
		held = held[:0]
		if err != nil {
			return s.writeErr("restore commit", err)
		}
		return nil
	}
	var bk *bolt.Bucket
	var bkName []byte
	apply := func(blk []byte) error {
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
			_, keep, err := s.buckets.keep(bucket, key, opts)
			if err != nil {
				return err
			}
			if !keep {
				continue
			}
			if tx == nil {
				if tx, err = s.db.Begin(true); err != nil {
					return fmt.Errorf("state: restore: begin write: %w", err)
				}
				bk, bkName = nil, nil
			}
			if bk == nil || string(bkName) != string(bucket) {
				if bk, err = tx.CreateBucketIfNotExists(bucket); err != nil {
					return s.writeErr("restore bucket", err)
				}
				bk.FillPercent = 1
				bkName = append(bkName[:0], bucket...)
			}
			if deleted {
				err = bk.Delete(key)
			} else {
				err = bk.Put(key, value) // bbolt copies the key; value stays in the block until commit
			}
			if err != nil {
				return s.writeErr("restore write", err)
			}
		}
		return nil
	}
	var err error
	for blk := range blocks {
		if err = apply(blk); err != nil {
			break
		}
		held = append(held, blk)
		if txBytes += cap(blk); txBytes >= restoreTxBytes {
			if err = commit(); err != nil {
				break
			}
		}
	}
	if err != nil {
		close(stop)
		for range blocks { // let the reader finish
		}
		<-errc
		if tx != nil {
			_ = tx.Rollback()
		}
		return fmt.Errorf("state: restore: %w", err)
	}
	if err := <-errc; err != nil {
		if tx != nil {
			_ = tx.Rollback()
		}
		return fmt.Errorf("state: restore: %w", err)
	}
	if err := commit(); err != nil {
		return fmt.Errorf("state: restore: %w", err)
	}
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, bk *bolt.Bucket) error {
			s.keys += bk.Stats().KeyN
			return nil
		})
	})
}
