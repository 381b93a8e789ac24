package sink

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/state/vfs"
)

func items(lines ...string) []record.Item {
	var out []record.Item
	for _, l := range lines {
		out = append(out, record.Item{Payload: []byte(l)})
	}
	return out
}

// committed returns the visible lines of dir, part by part in epoch order.
func committed(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var lines []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Fields(string(b))...)
	}
	return lines
}

func TestTwoPhaseFile_CommitCycle(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenTwoPhaseFile(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Write(1, items("a", "b")))
	must(s.Write(2, items("c"))) // a producer already past barrier 1
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("visible before commit: %v", got)
	}
	must(s.PreCommit(1))
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("visible after pre-commit only: %v", got)
	}
	must(s.Commit(1))
	if got := committed(t, dir); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after commit 1: %v", got)
	}
	must(s.Write(2, items("d")))
	must(s.PreCommit(2))
	must(s.Commit(2))
	if got := committed(t, dir); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("after commit 2: %v", got)
	}
	must(s.Close())
}

// TestTwoPhaseFile_Recover pins what a restart does with each kind of part:
// pre-committed parts of the restored checkpoint are committed, later ones
// and in-progress ones are discarded (replay produces them again).
func TestTwoPhaseFile_Recover(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenTwoPhaseFile(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	for e, l := range map[uint64]string{3: "x", 4: "y", 5: "z"} {
		if err := s.Write(e, items(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PreCommit(4); err != nil { // 3 and 4 pending, 5 in progress
		t.Fatal(err)
	}
	s.Close() // a crash: Commit(3) never ran

	r, err := OpenTwoPhaseFile(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Recover(3); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("after recover(3): %v", got)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".part-*"))
	if len(left) != 0 {
		t.Fatalf("hidden parts left after recover: %v", left)
	}
	// Recovery is idempotent: a crash during Recover is followed by another.
	if err := r.Recover(3); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("after second recover: %v", got)
	}
}

// A start that restores a checkpoint older than the newest committed one
// (the newer ones did not verify) keeps the parts those made visible: the
// replay's copies of their lines are dropped, each copy once, and new
// epochs come after theirs.
func TestTwoPhaseFile_RecoverBehindVisibleParts(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenTwoPhaseFile(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Write(1, items("a")))
	must(s.Write(2, items("b", "c", "c")))
	must(s.Write(3, items("d")))
	must(s.PreCommit(3))
	must(s.Commit(3))
	s.Close()
	before := committed(t, dir)

	r, err := OpenTwoPhaseFile(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	must(r.Recover(1)) // checkpoints 2 and 3 are lost
	if got := r.NewestCommitted(); got != 3 {
		t.Fatalf("NewestCommitted %d, want 3", got)
	}
	if got := committed(t, dir); !slices.Equal(got, before) {
		t.Fatalf("recover changed the visible parts: %v, want %v", got, before)
	}
	// The replay, cut into epochs its own way, brings b, c, c and d again,
	// then what the lost run never produced. The pipelines number the
	// first epoch from the restored checkpoint (2); its part takes the
	// first checkpoint id after the visible parts (4).
	must(r.Write(2, items("b", "c")))
	must(r.PreCommit(4))
	must(r.Commit(4))
	if got := committed(t, dir); !slices.Equal(got, before) {
		t.Fatalf("the replay's first epoch changed the visible parts: %v, want %v", got, before)
	}
	must(r.Write(5, items("c", "d", "c", "e")))
	must(r.PreCommit(5))
	must(r.Commit(5))
	if got, want := committed(t, dir), []string{"a", "b", "c", "c", "d", "c", "e"}; !slices.Equal(got, want) {
		t.Fatalf("after the replay: %v, want %v", got, want)
	}
	if got := r.Duplicates(); got != 4 {
		t.Fatalf("Duplicates %d, want 4", got)
	}
}

// listCountingFS counts directory listings.
type listCountingFS struct {
	vfs.FS
	lists int
}

func (f *listCountingFS) List(dir string) ([]string, error) {
	f.lists++
	return f.FS.List(dir)
}

// A commit per checkpoint publishes the parts pre-committed since the last
// one, several epochs at a time when a checkpoint completes late, without
// listing the directory, which grows by a committed part per checkpoint:
// only the first commit after opening looks for parts a previous run left.
func TestTwoPhaseFile_CommitsWithoutListing(t *testing.T) {
	dir := t.TempDir()
	fsys := &listCountingFS{FS: vfs.Default}
	s, err := OpenTwoPhaseFile(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for epoch := uint64(1); epoch <= 20; epoch++ {
		line := strconv.FormatUint(epoch, 10)
		want = append(want, line)
		if err := s.Write(epoch, items(line)); err != nil {
			t.Fatal(err)
		}
		if err := s.PreCommit(epoch); err != nil {
			t.Fatal(err)
		}
		if epoch%3 == 0 { // checkpoints 1 and 2 completed with 3
			if err := s.Commit(epoch); err != nil {
				t.Fatal(err)
			}
			if got := committed(t, dir); !slices.Equal(got, want) {
				t.Fatalf("after commit %d: %v, want %v", epoch, got, want)
			}
		}
	}
	if fsys.lists != 1 {
		t.Errorf("%d directory listings for 6 commits, want 1", fsys.lists)
	}
}
