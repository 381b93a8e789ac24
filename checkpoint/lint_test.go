package checkpoint

import (
	"os"
	"strings"
	"testing"
)

// TestLint_DeterministicCore greps the pure parts for what they must not
// use: a clock, goroutines, channels or the disk (as pebble's lint_test
// does for its own rules).
func TestLint_DeterministicCore(t *testing.T) {
	banned := []string{"time.Now", "time.Sleep", "time.Since", "go func", "chan ", "os.", "sync."}
	for _, file := range []string{"coordinator.go", "barrier.go", "retention.go"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if file == "retention.go" {
			// PlanRetention is pure; Store.Retain below it does the I/O.
			src = src[:strings.Index(src, "// Retain applies")]
		}
		for _, word := range banned {
			if strings.Contains(src, word) {
				t.Errorf("%s uses %q", file, word)
			}
		}
	}
}
