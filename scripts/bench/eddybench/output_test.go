package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOutputWatcher_PartialLinesAndTotals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	w := newOutputWatcher(path, "")
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	write(`{"id":"b/p/k1/0-1000/0","key":"k1","window_end_ms":1000,"n":3}` + "\n" + `{"id":"b/p/k2/0-1000/0","key":"k2",`)
	w.poll()
	if len(w.seen) != 1 {
		t.Fatalf("saw %d records, want 1 (the second line is not complete)", len(w.seen))
	}
	write(`"window_end_ms":1000,"n":4}` + "\n" + `{"id":"b/p/k1/0-1000/1","key":"k1","window_end_ms":1000,"n":5}` + "\n" +
		`{"id":"b/p/k1/0-1000/1","key":"k1","window_end_ms":1000,"n":5}` + "\n")
	w.poll()
	records, sum, repeats := w.totals()
	// k1's last firing has n=5, k2's n=4; the repeated firing 1 is counted.
	if records != 4 || sum != 9 || repeats != 1 {
		t.Fatalf("totals = %d records, Σn %v, %d repeats; want 4, 9, 1", records, sum, repeats)
	}
}

func TestOutputWatcher_CommittedPartsOnly(t *testing.T) {
	dir := t.TempDir()
	w := newOutputWatcher("", dir)
	rec := `{"id":"b/p/k/0-1000/0","key":"k","window_end_ms":1000,"n":1}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, ".part-00000000000000000001.jsonl.pending"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	w.poll()
	if len(w.seen) != 0 {
		t.Fatal("a pending part was read as visible output")
	}
	if err := os.WriteFile(filepath.Join(dir, "part-00000000000000000001.jsonl"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	w.poll()
	if len(w.seen) != 1 {
		t.Fatalf("saw %d committed records, want 1", len(w.seen))
	}
}
