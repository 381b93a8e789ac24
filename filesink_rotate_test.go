package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// rotateConfig is crashConfig writing every result to two exactly-once
// file sinks: "out" keeps every part, "kept" at most three.
var rotateConfig = replaceAll(crashConfig, `  to = [sink.file.out]`, `  to = [sink.file.out, sink.file.kept]`,
	`sink "file" "out" {`, `sink "file" "kept" {
  path     = "%DIR%/kept"
  delivery = "exactly_once"
  rotate { max_files = 3 }
}
sink "file" "out" {`)

// TestFileSink_RotateKeepsNewestCommittedParts runs the crash test's job
// through the binary into two exactly-once file sinks fed the same results
// at the same checkpoints, one with rotate { max_files = 3 }: at the end it
// holds exactly the three newest committed parts of the other, byte for
// byte, and no pending or in-progress part.
func TestFileSink_RotateKeepsNewestCommittedParts(t *testing.T) {
	dir := t.TempDir()
	writeReadings(t, filepath.Join(dir, "in.jsonl"), 1000, 1200, 31)
	runToEndWith(t, dir, rotateConfig)

	all, _ := filepath.Glob(filepath.Join(dir, "out", "part-*.jsonl"))
	slices.Sort(all)
	if len(all) <= 3 {
		t.Fatalf("the job committed %d parts: too few to rotate", len(all))
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "kept", "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, "kept", ".*"))
	kept = append(kept, hidden...)
	slices.Sort(kept)
	newest := all[len(all)-3:]
	var want []string
	for _, p := range newest {
		want = append(want, filepath.Join(dir, "kept", filepath.Base(p)))
	}
	if !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want the newest three parts %v", kept, want)
	}
	for i, p := range newest {
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(kept[i])
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s", kept[i], p)
		}
	}
	t.Logf("%d parts committed, the newest 3 kept", len(all))
}
