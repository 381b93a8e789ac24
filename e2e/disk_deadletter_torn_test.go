//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

const tornDeadLetterConfig = `
agent {
  device_id = "torn"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
source "file" "in" {
  path = "%DIR%/in.jsonl"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
sink "file" "dead" { path = "%DIR%/fs/dead.jsonl" }
pipeline "p" {
  from        = source.file.in
  key         = event.device
  window "tumbling" { size = "10s" }
  aggregate { n = count() }
  to          = [sink.file.out]
  dead_letter = sink.file.dead
}
checkpoint { interval = "100ms" }
`

// TestDiskFull_DeadLetterLinesStayWhole: the dead-letter file (an
// at-least-once file sink) is on a small file system (a tmpfs the test
// mounts) with little room left, and the input holds readings that do not
// parse, about 20 KB each. A dead-letter write meets the full disk part of
// the way through a line; once space is freed the pipelines restart from
// the last checkpoint and write those dead letters again. Every line of
// the dead-letter file then parses, and every bad reading is in it.
func TestDiskFull_DeadLetterLinesStayWhole(t *testing.T) {
	t.Parallel()
	const bad = 200
	dir := t.TempDir()
	fsDir := filepath.Join(dir, "fs")
	tmpfs.Mount(t, fsDir, "16m")

	f, err := os.Create(filepath.Join(dir, "in.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	filler := strings.Repeat("x", 20_000)
	for i := range 2000 {
		ts := strconv.Itoa(1_700_000_000_000 + i*100)
		if i%10 == 5 {
			// Does not parse: an unterminated string.
			w.WriteString(`{"device":"dev-` + strconv.Itoa(i%7) + `","ts":` + ts + `,"bad":` + strconv.Itoa(i) + `,"v":"` + filler + "\n")
			continue
		}
		w.WriteString(`{"device":"dev-` + strconv.Itoa(i%7) + `","ts":` + ts + `,"v":1}` + "\n")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	full := tmpfs.Fill(t, fsDir, 300<<10)
	ag := startAgent(t, dir, tornDeadLetterConfig)
	waitDiskFull(t, ag, fsDir)
	if !ag.waitLog("disk full: pipelines wait until space frees", 60*time.Second) {
		t.Fatal("no dead-letter write met the full disk")
	}
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, ag)

	dl, err := os.ReadFile(filepath.Join(fsDir, "dead.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for n, line := range strings.Split(strings.TrimSuffix(string(dl), "\n"), "\n") {
		var d struct {
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("dead-letter line %d (%d bytes) does not parse: %v", n+1, len(line), err)
		}
		if i := strings.Index(d.Payload, `"bad":`); i >= 0 {
			seen[d.Payload[i:i+10]] = true
		}
	}
	if len(seen) != bad {
		t.Errorf("%d bad readings in the dead-letter file, want %d", len(seen), bad)
	}
}
