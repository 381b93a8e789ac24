package window

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The window packages are pure logic: no clock, sleep, goroutine, channel or
// file access outside tests. This test greps for what was decided against.
func TestPureLogic(t *testing.T) {
	banned := []string{"time.Now", "time.Sleep", "time.Since", "go func", "chan ", "os.Open", "os.Create", "sync.", "math/rand"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range banned {
			if strings.Contains(string(b), s) {
				t.Errorf("%s uses %q", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
