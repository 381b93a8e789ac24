package sink

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state/vfs"
)

// TwoPhaseFile is the exactly-once file sink: two-phase commit over part
// files in a directory, driven by checkpoints (two-phase commit, as Flink's TwoPhaseCommitSinkFunction).
//
// Epoch n is what the pipeline produced between checkpoints n−1 and n. Its
// items go to a hidden in-progress part file; at barrier n, PreCommit
// flushes, fsyncs and renames it to a hidden pending name (pre-commit: it is
// now part of checkpoint n); when checkpoint n completes, Commit renames
// every pending part ≤ n to its visible name. Recover, at start, commits the
// pending parts of the restored checkpoint and deletes the pending and
// in-progress parts after it, which will be recomputed by replay. Parts
// already visible after it (a start that restored an older checkpoint than
// the newest, which did not verify) stay as they are: the replay's copies of
// their lines are dropped, and new parts take epochs after theirs
// (NewestCommitted). Readers of the directory therefore see whole part files
// only, each record exactly once, and never see a visible part change:
//
//	DIR/part-<epoch, 20 digits>.jsonl            committed, visible
//	DIR/.part-<epoch>.jsonl.pending              pre-committed, awaiting Commit
//	DIR/.part-<epoch>.jsonl.inprogress           being written
//
// Every rename is followed by an fsync of the directory. Committed parts
// are kept unless SetRetention bounds them. Methods are safe for concurrent
// use.
type TwoPhaseFile struct {
	mu   sync.Mutex
	fs   vfs.FS
	dir  string
	open map[uint64]*partFile // in-progress parts by epoch
	// pending are the epochs of the pre-committed parts, ascending, once
	// the directory has been scanned for them (scanned): Commit then does
	// not list a directory that grows by a committed part per checkpoint.
	pending []uint64
	scanned bool
	err     error
	// retention bounds the committed parts (SetRetention).
	retention PartRetention
	// ahead holds, by hash, the lines of the parts Recover found visible
	// after the restored checkpoint, each absorbing one copy from the
	// replay; newest is the newest epoch of a visible part.
	ahead      map[uint64]int32
	aheadSeed  maphash.Seed
	newest     uint64
	duplicates int64
}

type partFile struct {
	f vfs.File
	w *bufio.Writer
}

const (
	partPrefix      = "part-"
	partSuffix      = ".jsonl"
	pendingSuffix   = ".pending"
	inprogressSufix = ".inprogress"
)

// OpenTwoPhaseFile opens the sink on dir of fsys (nil: vfs.Default),
// creating it durably (vfs.MkdirAllSynced).
func OpenTwoPhaseFile(fsys vfs.FS, dir string) (*TwoPhaseFile, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := vfs.MkdirAllSynced(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("sink: create %s: %w", dir, err)
	}
	return &TwoPhaseFile{fs: fsys, dir: dir, open: map[uint64]*partFile{}}, nil
}

func partName(epoch uint64) string {
	return fmt.Sprintf("%s%020d%s", partPrefix, epoch, partSuffix)
}

func (s *TwoPhaseFile) path(epoch uint64, suffix string) string {
	if suffix == "" {
		return filepath.Join(s.dir, partName(epoch))
	}
	return filepath.Join(s.dir, "."+partName(epoch)+suffix)
}

// Write appends items to epoch's in-progress part. Several epochs may be
// open at once: a producer past barrier n writes epoch n+1 while others
// still write epoch n.
func (s *TwoPhaseFile) Write(epoch uint64, items []record.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if epoch <= s.newest {
		// The pipelines number the epoch after the restored checkpoint
		// from it, but checkpoint ids continue after the newest visible
		// part (NewestCommitted): the first barrier after the start is
		// newest+1, and its part must not take a visible part's name.
		epoch = s.newest + 1
	}
	p := s.open[epoch]
	for _, it := range items {
		if len(s.ahead) > 0 && s.seenAhead(it.Payload) {
			continue
		}
		if p == nil {
			f, err := s.fs.OpenFile(s.path(epoch, inprogressSufix), os.O_CREATE|os.O_WRONLY|os.O_TRUNC)
			if err != nil {
				return s.fail(fmt.Errorf("sink: open part: %w", err))
			}
			p = &partFile{f: f, w: bufio.NewWriterSize(f, fileBufferSize)}
			s.open[epoch] = p
		}
		p.w.Write(it.Payload)
		if err := p.w.WriteByte('\n'); err != nil {
			return s.fail(fmt.Errorf("sink: write part: %w", err))
		}
	}
	return nil
}

// PreCommit makes the parts of every epoch ≤ epoch durable and pending:
// flush, fsync, rename, then one fsync of the directory. An epoch with no
// items has no part.
func (s *TwoPhaseFile) PreCommit(epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	n := 0
	for e, p := range s.open {
		if e > epoch {
			continue
		}
		if err := p.w.Flush(); err != nil {
			return s.fail(fmt.Errorf("sink: flush part: %w", err))
		}
		if err := p.f.Sync(); err != nil {
			return s.fail(fmt.Errorf("sink: fsync part: %w", err))
		}
		if err := p.f.Close(); err != nil {
			return s.fail(fmt.Errorf("sink: close part: %w", err))
		}
		delete(s.open, e)
		if err := s.fs.Rename(s.path(e, inprogressSufix), s.path(e, pendingSuffix)); err != nil {
			return s.fail(fmt.Errorf("sink: pre-commit part: %w", err))
		}
		if i, found := slices.BinarySearch(s.pending, e); !found {
			s.pending = slices.Insert(s.pending, i, e)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	return s.syncDir()
}

// Commit publishes every pending part of an epoch ≤ epoch.
func (s *TwoPhaseFile) Commit(epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return s.commitLocked(epoch)
}

func (s *TwoPhaseFile) commitLocked(upTo uint64) error {
	if !s.scanned {
		pending, _, err := s.scan()
		if err != nil {
			return s.fail(err)
		}
		s.pending, s.scanned = pending, true
	}
	n := 0
	for n < len(s.pending) && s.pending[n] <= upTo {
		e := s.pending[n]
		if err := s.fs.Rename(s.path(e, pendingSuffix), s.path(e, "")); err != nil {
			s.pending = s.pending[n:]
			return s.fail(fmt.Errorf("sink: commit part: %w", err))
		}
		n++
	}
	s.pending = s.pending[n:]
	if n > 0 {
		if err := s.syncDir(); err != nil {
			return err
		}
	}
	if err := s.applyRetentionLocked(); err != nil {
		return s.fail(err)
	}
	return nil
}

// Recover runs at start, before any Write: it commits pending parts of
// epochs ≤ lastCompleted and deletes every pending or in-progress part
// after it (their results come again from replay). Visible parts after it
// stay, and the replay's copies of their lines are dropped (Duplicates).
func (s *TwoPhaseFile) Recover(lastCompleted uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending, inprogress, err := s.scan()
	if err != nil {
		return err
	}
	for _, e := range inprogress {
		if err := s.fs.Remove(s.path(e, inprogressSufix)); err != nil {
			return fmt.Errorf("sink: discard part: %w", err)
		}
	}
	kept := pending[:0]
	for _, e := range pending {
		if e > lastCompleted {
			if err := s.fs.Remove(s.path(e, pendingSuffix)); err != nil {
				return fmt.Errorf("sink: discard part: %w", err)
			}
			continue
		}
		kept = append(kept, e)
	}
	s.pending, s.scanned = kept, true
	if err := s.commitLocked(lastCompleted); err != nil {
		return err
	}
	if err := s.loadAhead(lastCompleted); err != nil {
		return err
	}
	return s.syncDir()
}

// NewestCommitted is, after Recover, the newest epoch of a visible part:
// the checkpoint ids that follow a start must be after it, so that no new
// part takes the name of one already visible.
func (s *TwoPhaseFile) NewestCommitted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newest
}

// Duplicates counts the lines dropped because a part visible before the
// start already held them.
func (s *TwoPhaseFile) Duplicates() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicates
}

// loadAhead reads the visible parts after lastCompleted: their lines were
// published under a checkpoint the start could not restore, and the replay
// from the older one produces them again.
func (s *TwoPhaseFile) loadAhead(lastCompleted uint64) error {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return fmt.Errorf("sink: list %s: %w", s.dir, err)
	}
	s.ahead, s.aheadSeed = nil, maphash.MakeSeed()
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, partPrefix)
		if !ok || !strings.HasSuffix(rest, partSuffix) {
			continue
		}
		ep, err := strconv.ParseUint(strings.TrimSuffix(rest, partSuffix), 10, 64)
		if err != nil {
			continue // not ours
		}
		s.newest = max(s.newest, ep)
		if ep <= lastCompleted {
			continue
		}
		if err := s.readAhead(filepath.Join(s.dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func (s *TwoPhaseFile) readAhead(path string) error {
	f, err := s.fs.Open(path)
	if err != nil {
		return fmt.Errorf("sink: read part: %w", err)
	}
	defer f.Close()
	if s.ahead == nil {
		s.ahead = map[uint64]int32{}
	}
	r := bufio.NewReaderSize(f, fileBufferSize)
	for {
		line, err := r.ReadBytes('\n') // once per start: a copy per line is fine
		if len(line) > 0 {
			s.ahead[maphash.Bytes(s.aheadSeed, bytes.TrimSuffix(line, []byte{'\n'}))]++
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sink: read part %s: %w", path, err)
		}
	}
}

// seenAhead reports whether line is one of a visible part after the
// restored checkpoint, and takes it off.
func (s *TwoPhaseFile) seenAhead(line []byte) bool {
	h := maphash.Bytes(s.aheadSeed, line)
	n, ok := s.ahead[h]
	if !ok {
		return false
	}
	if n == 1 {
		delete(s.ahead, h)
	} else {
		s.ahead[h] = n - 1
	}
	s.duplicates++
	return true
}

// scan lists the epochs of pending and in-progress parts, ascending.
func (s *TwoPhaseFile) scan() (pending, inprogress []uint64, err error) {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("sink: list %s: %w", s.dir, err)
	}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, "."+partPrefix)
		if !ok {
			continue
		}
		var list *[]uint64
		switch {
		case strings.HasSuffix(rest, partSuffix+pendingSuffix):
			rest, list = strings.TrimSuffix(rest, partSuffix+pendingSuffix), &pending
		case strings.HasSuffix(rest, partSuffix+inprogressSufix):
			rest, list = strings.TrimSuffix(rest, partSuffix+inprogressSufix), &inprogress
		default:
			continue
		}
		ep, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			continue // not ours
		}
		*list = append(*list, ep)
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i] < pending[j] })
	return pending, inprogress, nil
}

func (s *TwoPhaseFile) syncDir() error {
	if err := s.fs.SyncDir(s.dir); err != nil {
		return s.fail(fmt.Errorf("sink: fsync dir: %w", err))
	}
	return nil
}

func (s *TwoPhaseFile) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return err
}

// Close closes the open in-progress parts without pre-committing them:
// their items are not part of any checkpoint and Recover discards them.
func (s *TwoPhaseFile) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for e, p := range s.open {
		errs = append(errs, p.f.Close())
		delete(s.open, e)
	}
	return errors.Join(errs...)
}
