package state

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// restoreBatch is the number of entries Restore writes per transaction.
const restoreBatch = 4096

// Restore implements Backend: the working file is discarded and recreated,
// then entries are written in batched transactions.
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

func (s *Bolt) load(entries Entries, opts RestoreOptions) error {
	var tx *bolt.Tx
	n := 0
	commit := func() error {
		if tx == nil {
			return nil
		}
		err := tx.Commit()
		tx, n, s.arena = nil, 0, s.arena[:0]
		if err != nil {
			return s.writeErr("restore commit", err)
		}
		return nil
	}
	err := entries(func(bucket, key, value []byte, deleted bool) error {
		_, keep, err := s.buckets.keep(bucket, key, opts)
		if err != nil || !keep {
			return err
		}
		if tx == nil {
			if tx, err = s.db.Begin(true); err != nil {
				return fmt.Errorf("state: restore: begin write: %w", err)
			}
		}
		bk, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return s.writeErr("restore bucket", err)
		}
		if deleted {
			if err := bk.Delete(key); err != nil {
				return s.writeErr("restore delete", err)
			}
		} else {
			// bbolt keeps the slices until commit; the producer may reuse its own.
			start := len(s.arena)
			s.arena = append(s.arena, key...)
			s.arena = append(s.arena, value...)
			k := s.arena[start : start+len(key) : start+len(key)]
			v := s.arena[start+len(key) : len(s.arena) : len(s.arena)]
			if err := bk.Put(k, v); err != nil {
				return s.writeErr("restore put", err)
			}
		}
		if n++; n >= restoreBatch {
			return commit()
		}
		return nil
	})
	if err != nil {
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
