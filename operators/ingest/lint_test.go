package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLint greps the package's code for what it decided against: reading
// the clock or sleeping (the log's only timer is the background sync's
// ticker; arrival times come from the caller) and panics on disk data.
func TestLint(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"time.Now(", "time.Sleep(", "panic("} {
			if strings.Contains(string(b), banned) {
				t.Errorf("%s uses %s", f, banned)
			}
		}
	}
}
