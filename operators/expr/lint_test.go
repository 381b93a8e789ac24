package expr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLint greps the package for what it decided against: wall-clock time
// in deterministic logic, and panics on user input (bad input is a
// diagnostic or a RuntimeError).
func TestLint(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"time.Now", "time.Sleep", "panic("} {
			if strings.Contains(string(src), banned) {
				t.Errorf("%s uses %s", name, banned)
			}
		}
	}
}
