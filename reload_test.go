package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const reloadConfig = `
agent {
  device_id = "reload"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices = 3
  rate    = 200
}
sink "file" "one" { path = "%DIR%/one.jsonl" }
sink "file" "two" { path = "%DIR%/two.jsonl" }
pipeline "p1" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "%SIZE%"
  }
  aggregate { n = count() }
  to = [sink.file.one]
}
%EXTRA%
`

const reloadExtra = `
pipeline "p2" {
  from   = source.simulator.sim
  filter = event.temp != null
  key    = event.device
  window "tumbling" {
    time = "processing"
    size = "300ms"
  }
  aggregate { hottest = max(event.temp) }
  to = [sink.file.two]
}
`

// TestReload_SIGHUP changes the configuration of a running agent: adding a
// pipeline is applied (a checkpoint, then the pipelines restart on the new
// file and the old pipeline keeps its state); changing an existing
// pipeline's window is refused with a log line, and the agent keeps running
// on the previous configuration.
func TestReload_SIGHUP(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := freeAddr(t)
	write := func(size, extra string) {
		cfg := replaceAll(reloadConfig, "%BROKER%", brokerAddr, "%SIZE%", size, "%EXTRA%", extra)
		cfg = replaceAll(cfg, "%DATA%", filepath.Join(dir, "data"), "%DIR%", dir)
		if err := os.WriteFile(filepath.Join(dir, "agent.hcl"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("300ms", "")
	cfg, _ := os.ReadFile(filepath.Join(dir, "agent.hcl"))
	ag := startAgent(t, dir, string(cfg))
	logContains := func(s string) bool {
		b, _ := os.ReadFile(ag.log)
		return strings.Contains(string(b), s)
	}
	waitFor(t, 15*time.Second, func() bool { b, _ := os.ReadFile(filepath.Join(dir, "one.jsonl")); return len(b) > 0 })

	// startAgent substituted %ADMIN%; keep the same admin address.
	rewrite := func(size, extra string) {
		write(size, extra)
		b, _ := os.ReadFile(filepath.Join(dir, "agent.hcl"))
		os.WriteFile(filepath.Join(dir, "agent.hcl"), []byte(strings.ReplaceAll(string(b), "%ADMIN%", ag.admin)), 0o644)
	}
	rewrite("300ms", reloadExtra)
	ag.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 20*time.Second, func() bool { return logContains("configuration reloaded") })
	// The reload is logged before the rebuilt pipelines restore.
	waitFor(t, 20*time.Second, func() bool { return logContains("restored checkpoint") })
	waitFor(t, 15*time.Second, func() bool { b, _ := os.ReadFile(filepath.Join(dir, "two.jsonl")); return len(b) > 0 })

	rewrite("1s", reloadExtra) // p1's window changes: its state would not fit
	ag.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, func() bool { return logContains("configuration reload refused") })
	b, _ := os.ReadFile(ag.log)
	if !strings.Contains(string(b), `pipeline \"p1\": the window changed`) && !strings.Contains(string(b), `pipeline "p1": the window changed`) {
		t.Fatalf("the refusal does not say why:\n%s", b)
	}
	// Still running on the previous configuration.
	before, _ := os.ReadFile(filepath.Join(dir, "two.jsonl"))
	waitFor(t, 10*time.Second, func() bool {
		after, _ := os.ReadFile(filepath.Join(dir, "two.jsonl"))
		return len(after) > len(before)
	})
	ag.stop(t)
}
