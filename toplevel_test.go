package main

import (
	"os"
	"slices"
	"testing"
)

// TestLayout_TopLevelFixed: the repository's top level holds the fixed set
// of packages (docs/architecture.md "Packages"); a new package goes under
// the one that owns its concept.
func TestLayout_TopLevelFixed(t *testing.T) {
	allowed := []string{"agent", "checkpoint", "config", "docs", "e2e", "examples", "operators", "scripts", "state", "upload", "window"}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name()[0] != '.' && e.Name() != "dist" && e.Name() != "eddy-data" && !slices.Contains(allowed, e.Name()) {
			t.Errorf("top-level directory %s/: put it under the package that owns its concept", e.Name())
		}
	}
}
