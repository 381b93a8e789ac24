package qos2

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLint_Pure keeps the session a pure state machine: no clock, sleeps,
// goroutines, sockets or files outside tests (STYLE.md, "Core logic vs I/O").
func TestLint_Pure(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"time.Now", "time.Sleep", "go func", `"net"`, `"os"`} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s uses %s", f, bad)
			}
		}
	}
}
