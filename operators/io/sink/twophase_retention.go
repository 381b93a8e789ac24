package sink

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PartRetention bounds the committed part files an exactly-once file sink
// keeps. The zero value keeps every part.
type PartRetention struct {
	// MaxFiles keeps at most this many committed parts, the newest; 0 means
	// no limit.
	MaxFiles int
	// MaxAge deletes committed parts last written longer ago than this; 0
	// means no limit.
	MaxAge time.Duration
}

func (r PartRetention) enabled() bool { return r.MaxFiles > 0 || r.MaxAge > 0 }

// committedPart is a visible part file: its epoch and when it was last
// written.
type committedPart struct {
	epoch   uint64
	written time.Time
}

// partsToDelete returns, oldest first, the epochs of the committed parts r
// does not keep at time now. parts are in ascending epoch order. A part is
// deleted when MaxFiles newer parts exist, or when it was last written more
// than MaxAge before now.
func partsToDelete(parts []committedPart, r PartRetention, now time.Time) []uint64 {
	var out []uint64
	for i, p := range parts {
		tooMany := r.MaxFiles > 0 && len(parts)-i > r.MaxFiles
		tooOld := r.MaxAge > 0 && now.Sub(p.written) > r.MaxAge
		if tooMany || tooOld {
			out = append(out, p.epoch)
		}
	}
	return out
}

// SetRetention makes every later Commit and Recover delete the committed
// parts r does not keep. Call it before the sink is used.
func (s *TwoPhaseFile) SetRetention(r PartRetention) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retention = r
}

// applyRetentionLocked deletes, oldest first, the committed parts the
// retention does not keep, then fsyncs the directory. Only visible parts are
// candidates: a pending or in-progress part, whose results are not yet
// committed, is never touched. Deleting is idempotent: after a crash part way
// through, the next commit deletes what is left.
func (s *TwoPhaseFile) applyRetentionLocked() error {
	if !s.retention.enabled() {
		return nil
	}
	parts, err := s.committedParts()
	if err != nil {
		return err
	}
	del := partsToDelete(parts, s.retention, time.Now())
	if len(del) == 0 {
		return nil
	}
	for _, e := range del {
		if err := os.Remove(s.path(e, "")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sink: delete part past retention: %w", err)
		}
	}
	return s.syncDir()
}

// committedParts lists the visible parts of the directory, ascending.
func (s *TwoPhaseFile) committedParts() ([]committedPart, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("sink: list %s: %w", s.dir, err)
	}
	var out []committedPart
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), partPrefix)
		if !ok || !strings.HasSuffix(rest, partSuffix) {
			continue
		}
		ep, err := strconv.ParseUint(strings.TrimSuffix(rest, partSuffix), 10, 64)
		if err != nil {
			continue // not ours
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, committedPart{epoch: ep, written: info.ModTime()})
	}
	slices.SortFunc(out, func(a, b committedPart) int { return cmp.Compare(a.epoch, b.epoch) })
	return out, nil
}
