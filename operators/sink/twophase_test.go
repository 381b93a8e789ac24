package sink

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func items(lines ...string) []Item {
	var out []Item
	for _, l := range lines {
		out = append(out, Item{Payload: []byte(l)})
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
