package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRestart_SinkFailureRestartsFromCheckpoint: the exactly-once sink's
// directory disappears under a running agent, so its writes fail; the run
// stops, the restart strategy waits and restarts the pipelines from the
// last checkpoint, and the job completes.
func TestRestart_SinkFailureRestartsFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	writeReadings(t, input, 1000, 400, 3)
	cfg := replaceAll(crashConfig, "%DATA%", filepath.Join(dir, "data"), "%DIR%", dir) + `
restart {
  strategy = "fixed_delay"
  attempts = 3
  delay    = "200ms"
}
`
	path := filepath.Join(dir, "agent.hcl")
	os.WriteFile(path, []byte(cfg), 0o644)
	cmd := exec.Command(eddyBin, "run", "-c", path)
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return strings.Contains(log.String(), "checkpoint completed") })
	// Replace the sink's directory by a file: every part file write fails.
	out := filepath.Join(dir, "out")
	os.RemoveAll(out)
	os.WriteFile(out, []byte("not a directory"), 0o644)
	waitFor(t, 20*time.Second, func() bool { return strings.Contains(log.String(), "restarting from the last checkpoint") })
	os.Remove(out) // the disk is fine again
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent exited with %v after the restart:\n%s", err, log.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the job did not finish after the restart:\n%s", log.String())
	}
	if n := len(committedRecords(t, out)); n == 0 {
		t.Fatalf("no committed output after the restart:\n%s", log.String())
	}
}

// TestRestart_GivesUp: a failure that persists (a state store too small for
// the job) restarts as often as the strategy allows, then the agent exits
// non-zero so that systemd takes over.
func TestRestart_GivesUp(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	writeReadings(t, input, 20000, 10, 4)
	cfg := replaceAll(crashConfig, "%DATA%", filepath.Join(dir, "data"), "%DIR%", dir) + `
state {
  max_size = "1MiB"
  cache    = "64KiB"
}
restart {
  strategy = "fixed_delay"
  attempts = 2
  delay    = "100ms"
}
`
	path := filepath.Join(dir, "agent.hcl")
	os.WriteFile(path, []byte(cfg), 0o644)
	out, err := exec.Command(eddyBin, "run", "-c", path).CombinedOutput()
	if err == nil {
		t.Fatalf("agent exited 0 with a state store that cannot hold the job:\n%s", out)
	}
	s := string(out)
	if c := strings.Count(s, "restarting from the last checkpoint"); c != 2 {
		t.Fatalf("%d restarts, want 2 (fixed_delay attempts):\n%s", c, s)
	}
	if !strings.Contains(s, "restart strategy gives up") || !strings.Contains(s, "state store full") {
		t.Fatalf("the exit does not say why:\n%s", s)
	}
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
