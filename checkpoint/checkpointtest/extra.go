// Package checkpointtest helps tests make a data_dir's checkpoints look
// written by an earlier build.
package checkpointtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// StripExtra removes, from every manifest of the checkpoints under
// dataDir, the extra entries whose name starts with one of prefixes: what
// a build that did not record them wrote.
func StripExtra(t testing.TB, dataDir string, prefixes ...string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dataDir, "checkpoints", "manifests", "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no checkpoint manifest under %s (%v)", dataDir, err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		extra, _ := m["extra"].(map[string]any)
		for k := range extra {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					delete(extra, k)
				}
			}
		}
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
