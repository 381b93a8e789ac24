package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
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
// pipeline's tumbling window into a sliding one, which cannot roll over,
// is refused with a log line, and the agent keeps running on the previous
// configuration.
func TestReload_SIGHUP(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	ag := startAgent(t, dir, reloadConfig, "%BROKER%", brokerAddr, "%SIZE%", "300ms", "%EXTRA%", "")
	await.True(t, 15*time.Second, `len(b) > 0`, func() bool { b, _ := os.ReadFile(filepath.Join(dir, "one.jsonl")); return len(b) > 0 })

	// The same admin address as the running agent's.
	rewrite := func(config, size, extra string) {
		writeConfig(t, dir, config, "%BROKER%", brokerAddr, "%SIZE%", size, "%EXTRA%", extra, "%ADMIN%", ag.admin)
	}
	rewrite(reloadConfig, "300ms", reloadExtra)
	ag.signal(syscall.SIGHUP)
	await.True(t, 20*time.Second, `ag.logContains("configuration reloaded")`, func() bool { return ag.logContains("configuration reloaded") })
	// The reload is logged before the rebuilt pipelines restore.
	await.True(t, 20*time.Second, `ag.logContains("restored checkpoint")`, func() bool { return ag.logContains("restored checkpoint") })
	await.True(t, 15*time.Second, `len(b) > 0`, func() bool { b, _ := os.ReadFile(filepath.Join(dir, "two.jsonl")); return len(b) > 0 })

	sliding := strings.Replace(reloadConfig, `window "tumbling" {`, `window "sliding" {
    slide = "100ms"`, 1)
	rewrite(sliding, "300ms", reloadExtra) // p1's window slides: it cannot roll over
	ag.signal(syscall.SIGHUP)
	await.True(t, 10*time.Second, `ag.logContains("configuration reload refused")`, func() bool { return ag.logContains("configuration reload refused") })
	if !ag.logContains(`pipeline \"p1\": window changed (kind tumbling → sliding, slide 0s → 100ms), which cannot roll over: its new window is sliding on processing time`) {
		t.Fatal("the refusal does not say why")
	}
	// Still running on the previous configuration.
	before, _ := os.ReadFile(filepath.Join(dir, "two.jsonl"))
	await.True(t, 10*time.Second, `len(after) > len(before)`, func() bool {
		after, _ := os.ReadFile(filepath.Join(dir, "two.jsonl"))
		return len(after) > len(before)
	})
	ag.stop(syscall.SIGTERM, 20*time.Second)
}
