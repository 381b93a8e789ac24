package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRestore_WindowLayoutChange: a checkpoint holding sliding windows as one
// state per window (trigger_count keeps that layout) is not read into the
// pane layout of the same window without trigger_count. The binary refuses
// to start and says how to go on; with --allow-non-restored-state it drops
// that state, says so, and runs to the end.
func TestRestore_WindowLayoutChange(t *testing.T) {
	dir := t.TempDir()
	writeReadings(t, filepath.Join(dir, "in.jsonl"), 1000, 100, 3)
	perWindow := replaceAll(crashConfig, `  window "tumbling" { size = "10s" }`, `  window "sliding" {
    size          = "30s"
    slide         = "10s"
    trigger_count = 1000000
  }`,
		"  to = [sink.file.out]\n}", "  to = [sink.file.out]\n  debug_delay_per_record = \"50us\"\n}")
	path := writeConfig(t, dir, perWindow)
	p := startEddy(t, "run", "-c", path)
	waitFor(t, 20*time.Second, func() bool { return p.logContains("checkpoint completed") })
	p.kill()

	writeConfig(t, dir, strings.Replace(perWindow, "    trigger_count = 1000000\n", "", 1))
	out, err := runEddy(t, "run", "-c", path)
	if err == nil {
		t.Fatal("the agent started on a checkpoint of the other window layout")
	}
	for _, want := range []string{`pipeline "sums"'s windows as one state per window`, "keeps them in panes", "--allow-non-restored-state"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the refusal does not say %q", want)
		}
	}
	out, err = runEddy(t, "run", "-c", path, "--allow-non-restored-state")
	if err != nil {
		t.Fatalf("with --allow-non-restored-state: %v", err)
	}
	if !strings.Contains(out, "dropped window state of another layout") {
		t.Fatal("the run does not say it dropped the state")
	}
	if n := len(committedRecords(t, filepath.Join(dir, "out"))); n == 0 {
		t.Fatal("no output after dropping the state")
	}
}
