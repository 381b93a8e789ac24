package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestFileWrites_LargestSizePerFileByClass(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, n int) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := newFileWrites(root)
	write("data/ingest/src/1.log", 100)
	write("data/wal/out/0001.wal", 10)
	write("data/state/0.db", 4096) // the remainder: not a class
	w.scan()
	write("data/ingest/src/1.log", 300) // appended
	os.Remove(filepath.Join(root, "data/wal/out/0001.wal"))
	write("data/wal/out/0002.wal", 20) // deleted and a new one
	write("out/part-1.jsonl", 7)
	w.scan()
	got := w.snapshot()
	want := map[string]int64{"ingest": 300, "wal": 30, "sink": 7}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("classes %v, want %v", got, want)
	}
}

func TestRSSTrend_FlatAndGrowing(t *testing.T) {
	var at []float64
	var flat, growing []int64
	for s := 0; s <= 300; s++ {
		at = append(at, float64(s))
		flat = append(flat, 40<<20)
		growing = append(growing, int64(40<<20+s*(1<<20)/60)) // 1 MiB per minute
	}
	if mean, slope := rssTrend(at, flat); mean != 40<<20 || slope != 0 {
		t.Errorf("flat: mean %v slope %v", mean, slope)
	}
	if _, slope := rssTrend(at, growing); math.Abs(slope-1) > 0.01 {
		t.Errorf("growing 1 MiB/min: slope %v", slope)
	}
}
