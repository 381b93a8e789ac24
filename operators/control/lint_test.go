package control

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLint greps the package for what it decided against: wall-clock time,
// and panics on message data (bad messages are returned errors).
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
