package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLint_PureCores greps the deterministic cores for what each decided
// against: reading the clock or sleeping, goroutines and channels, files
// and sockets, panics on data. Their tests need no clock, disk or network
// because of it, and a replay gives the same result. (decode's allocation
// rules are in its own TestLint_NoForbiddenImports.)
func TestLint_PureCores(t *testing.T) {
	for _, c := range []struct {
		dir    string
		files  []string // nil: every non-test file, in subfolders too
		upTo   string   // for the last file: only the text before this line is pure
		banned []string
		why    string
	}{
		{dir: "window", banned: []string{"time.Now", "time.Sleep", "time.Since", "go func", "chan ", "os.Open", "os.Create", "sync.", "math/rand"},
			why: "windows, triggers and watermarks are pure logic"},
		{dir: "checkpoint", files: []string{"coordinator.go", "barrier.go", "retention.go"}, upTo: "// Retain applies",
			banned: []string{"time.Now", "time.Sleep", "time.Since", "go func", "chan ", "os.", "sync."},
			why:    "the coordinator is a state machine; Store.Retain below PlanRetention does the I/O"},
		{dir: "operators/io/walsink/qos2", banned: []string{"time.Now", "time.Sleep", "go func", `"net"`, `"os"`},
			why: "the QoS 2 session is a state machine; the sink does the I/O"},
		{dir: "operators/control", banned: []string{"time.Now", "time.Sleep", "panic("},
			why: "control messages are data: bad ones are returned errors"},
		{dir: "operators/expr", banned: []string{"time.Now", "time.Sleep", "panic("},
			why: "bad user input is a diagnostic or a RuntimeError"},
		{dir: "agent/probe", files: []string{"decide.go"}, banned: []string{"time.Now", "time.Sleep", "go func", "chan ", `"net"`, `"os"`},
			why: "the probe's verdict is a pure function of what it observed; upstream.go and source.go do the I/O"},
		{dir: "operators/io/sparkplug", files: []string{"node.go", "payload.go", "topic.go", "datatype.go", "reader.go", "reader_state.go"},
			banned: []string{"time.Now", "time.Sleep", "go func", "chan ", `"net"`, `"os"`, "panic("},
			why:    "the Sparkplug codec, edge-node session and reader are pure; bdseq.go does the I/O, the sink and source the MQTT"},
		{dir: "operators/io/ingest", banned: []string{"time.Now(", "time.Sleep(", "panic("},
			why: "arrival times come from the caller (the background sync's ticker is the log's only timer); disk data never panics"},
	} {
		files := c.files
		if files == nil {
			err := filepath.WalkDir(c.dir, func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
					files = append(files, strings.TrimPrefix(path, c.dir+"/"))
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for i, name := range files {
			b, err := os.ReadFile(filepath.Join(c.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			if c.upTo != "" && i == len(files)-1 {
				cut := strings.Index(src, c.upTo)
				if cut < 0 {
					t.Fatalf("%s/%s: marker %q not found", c.dir, name, c.upTo)
				}
				src = src[:cut]
			}
			for _, word := range c.banned {
				if strings.Contains(src, word) {
					t.Errorf("%s/%s uses %q (%s)", c.dir, name, word, c.why)
				}
			}
		}
	}
}

// TestLint_TestsAwaitNotSleep keeps the tests' one way to wait: a test
// waits for a condition with scripts/await, never by sleeping or by a loop
// of its own around the clock. A sleep that paces a workload (a publish
// rate, a moment to cut the power at) says so with a "// pacing:" comment
// on its line.
func TestLint_TestsAwaitNotSleep(t *testing.T) {
	banned := []string{"time.Sleep(", "deadline := time.Now().Add(", "end := time.Now().Add("}
	for _, f := range trackedFiles(t, "_test.go") {
		if strings.HasPrefix(f, "scripts/await/") || f == "lint_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, w := range banned {
				if strings.Contains(line, w) && !strings.Contains(line, "// pacing:") {
					t.Errorf("%s:%d: %s: wait with scripts/await (await.Until, await.True, await.Never), or mark a sleep that paces a workload with // pacing:", f, i+1, strings.TrimSuffix(w, "("))
				}
			}
		}
	}
}
