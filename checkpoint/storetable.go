package checkpoint

import (
	"errors"
	"fmt"
)

// OpenTable opens the snapshot file ref of the store as a Table (see
// OpenTable): one sequential read that verifies every block and the
// trailer, and checks the file's size, SHA-256 and header against ref.
// Damage, or a missing file, gives an error matching ErrCorrupt; a file out
// of (bucket, key) order one matching ErrUnordered.
func (s *Store) OpenTable(ref FileRef) (*Table, error) {
	f, err := s.openRef(ref)
	if err != nil {
		return nil, err
	}
	ix, sr, err := readIndex(f, entryHint(f, ref.Size))
	if err == nil {
		if err = checkHeader(ref, sr.Header()); err == nil {
			err = checkSum(ref, sr)
		}
	}
	if err != nil {
		f.Close()
		if IsCorruption(err) || errors.Is(err, ErrUnordered) {
			return nil, fmt.Errorf("checkpoint: %s: %w", ref.Name, err)
		}
		return nil, err
	}
	return NewTable(f, ix), nil
}

// CollectIndex makes the snapshot collect its TableIndex as it is written,
// for Table after Commit (see Writer.CollectIndex). It must be called
// before the first Add.
func (sf *SnapshotFile) CollectIndex() error { return sf.w.CollectIndex() }

// Table opens the committed file as a Table with the index collected while
// it was written (CollectIndex): it reopens the file by name and reads
// nothing. It fails if CollectIndex was not called, if Commit has not
// succeeded, and with an error matching ErrUnordered if the entries were
// not in (bucket, key) order; the committed file is valid in every case.
func (sf *SnapshotFile) Table() (*Table, error) {
	if !sf.committed {
		return nil, errors.New("checkpoint: Table of a snapshot not committed")
	}
	ix, err := sf.w.Index()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", sf.ref.Name, err)
	}
	f, err := sf.s.fs.Open(sf.s.path(sf.ref.Name))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", sf.ref.Name, err)
	}
	return NewTable(f, ix), nil
}

// WriteSnapshotTable is WriteSnapshot that also returns a Table of the new
// file, its index collected as it was written (no second read). When the
// file is committed but no Table can be made (entries out of order:
// ErrUnordered; the reopen failed) it returns the file's FileRef with the
// error: a non-zero FileRef means the file is durable, as from
// WriteSnapshot.
func (s *Store) WriteSnapshotTable(task, pipeline string, kind Kind, id uint64, entries func(fn func(bucket, key, value []byte, deleted bool) error) error) (FileRef, *Table, error) {
	sf, err := s.CreateSnapshot(task, pipeline, kind, id)
	if err != nil {
		return FileRef{}, nil, err
	}
	if err := sf.CollectIndex(); err != nil {
		sf.Abort()
		return FileRef{}, nil, err
	}
	if err := entries(sf.Add); err != nil {
		sf.Abort()
		return FileRef{}, nil, fmt.Errorf("checkpoint: snapshot of task %s, checkpoint %d: %w", task, id, err)
	}
	ref, err := sf.Commit()
	if err != nil {
		return FileRef{}, nil, err
	}
	t, err := sf.Table()
	return ref, t, err
}
