package main

import (
	"os"
	"os/exec"
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
	perWindow := replaceAll(crashConfig, "%DATA%", filepath.Join(dir, "data"), "%DIR%", dir,
		`  window "tumbling" { size = "10s" }`, `  window "sliding" {
    size          = "30s"
    slide         = "10s"
    trigger_count = 1000000
  }`,
		"  to = [sink.file.out]\n}", "  to = [sink.file.out]\n  debug_delay_per_record = \"50us\"\n}")
	path := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(path, []byte(perWindow), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(eddyBin, "run", "-c", path)
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return strings.Contains(log.String(), "checkpoint completed") })
	cmd.Process.Kill()
	cmd.Wait()

	panes := strings.Replace(perWindow, "    trigger_count = 1000000\n", "", 1)
	if err := os.WriteFile(path, []byte(panes), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(eddyBin, "run", "-c", path).CombinedOutput()
	if err == nil {
		t.Fatalf("the agent started on a checkpoint of the other window layout:\n%s", out)
	}
	for _, want := range []string{`pipeline "sums"'s windows as one state per window`, "keeps them in panes", "--allow-non-restored-state"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(eddyBin, "run", "-c", path, "--allow-non-restored-state").CombinedOutput()
	if err != nil {
		t.Fatalf("with --allow-non-restored-state: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "dropped window state of another layout") {
		t.Fatalf("the run does not say it dropped the state:\n%s", out)
	}
	if n := len(committedRecords(t, filepath.Join(dir, "out"))); n == 0 {
		t.Fatalf("no output after dropping the state:\n%s", out)
	}
}
