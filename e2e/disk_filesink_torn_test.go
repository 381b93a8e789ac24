//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

const tornLineConfig = `
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
sink "file" "out" { path = "%OUT%" }
sink "file" "dead" { path = "%DEAD%" }
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

// TestDiskFull_FileSinkLinesStayWhole: the results, or the dead letters,
// go to an at-least-once file sink on a small file system (a tmpfs the
// test mounts) with little room left; the input holds readings that do
// not parse, about 20 KB each. A write meets the full disk part of the way
// through a line; once space is freed the pipelines restart from the last
// checkpoint and write what followed it again. Every line of both files
// then parses, every bad reading is in the dead-letter file, and every
// window's result is in the results file.
func TestDiskFull_FileSinkLinesStayWhole(t *testing.T) {
	for _, tc := range []struct {
		name     string
		onSmall  string // the file on the small file system
		leave    int64  // bytes left free there
		expected string // what meets the full disk
	}{
		{"dead letters", "dead.jsonl", 300 << 10, "dead-letter write"},
		{"results", "out.jsonl", 8 << 10, "result write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fileSinkLinesStayWhole(t, tc.onSmall, tc.leave, tc.expected)
		})
	}
}

func fileSinkLinesStayWhole(t *testing.T, onSmall string, leave int64, expected string) {
	const bad = 200
	dir := t.TempDir()
	fsDir := filepath.Join(dir, "fs")
	tmpfs.Mount(t, fsDir, "16m")
	files := map[string]string{"out.jsonl": filepath.Join(dir, "out.jsonl"), "dead.jsonl": filepath.Join(dir, "dead.jsonl")}
	files[onSmall] = filepath.Join(fsDir, onSmall)

	f, err := os.Create(filepath.Join(dir, "in.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	filler := strings.Repeat("x", 20_000)
	want := map[string]float64{} // "device start" → readings
	for i := range 2000 {
		ts := strconv.Itoa(1_700_000_000_000 + i*100)
		if i%10 != 5 {
			want["dev-"+strconv.Itoa(i%7)+" "+strconv.Itoa(1_700_000_000_000+i*100/10_000*10_000)]++
		}
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

	full := tmpfs.Fill(t, fsDir, leave)
	ag := startAgent(t, dir, tornLineConfig, "%OUT%", files["out.jsonl"], "%DEAD%", files["dead.jsonl"])
	waitDiskFull(t, ag, fsDir)
	if !ag.waitLog("disk full: pipelines wait until space frees", 60*time.Second) {
		t.Fatalf("no %s met the full disk", expected)
	}
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, ag)

	seen := map[string]bool{}
	for _, line := range wholeLines(t, files["dead.jsonl"]) {
		var d struct {
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal(line, &d); err != nil {
			t.Fatal(err)
		}
		if i := strings.Index(d.Payload, `"bad":`); i >= 0 {
			seen[d.Payload[i:i+10]] = true
		}
	}
	if len(seen) != bad {
		t.Errorf("%d bad readings in the dead-letter file, want %d", len(seen), bad)
	}
	got := map[string]float64{}
	for _, line := range wholeLines(t, files["out.jsonl"]) {
		var r struct {
			Key   string  `json:"key"`
			Start int64   `json:"window_start_ms"`
			N     float64 `json:"n"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		got[r.Key+" "+strconv.FormatInt(r.Start, 10)] = r.N // a repeat says the same
	}
	if !maps.Equal(got, want) {
		t.Errorf("%d window results, want %d (every window, at least once, with its count)", len(got), len(want))
	}
}

// wholeLines returns the lines of the file at path, failing the test on
// one that is not a whole JSON value or on a last line without a newline.
func wholeLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s does not end with a newline", path)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	for n, line := range lines {
		if !json.Valid(line) {
			t.Fatalf("%s: line %d (%d bytes) does not parse", path, n+1, len(line))
		}
	}
	return lines
}
