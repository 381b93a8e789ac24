package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

// TestCorrupt_CheckpointSkipped damages the newest checkpoint of a stopped
// job in each way a device can (a flipped byte, a truncated file, a missing
// manifest, files without a manifest): the next start skips it, says which
// file and why, restores the previous good checkpoint, and the job's final
// output still equals an uninterrupted run.
func TestCorrupt_CheckpointSkipped(t *testing.T) {
	t.Parallel()
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeReadings(t, input, 1000, 800, 21)
	clean := t.TempDir()
	os.Link(input, filepath.Join(clean, "in.jsonl"))
	runToEnd(t, clean)
	want := committedRecords(t, filepath.Join(clean, "out"))

	damages := []struct {
		name   string
		damage func(t *testing.T, root string, newest manifestInfo)
		log    string // what the restart must say
	}{
		{"flipped byte", func(t *testing.T, root string, m manifestInfo) {
			p := filepath.Join(root, m.ownFile)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x40
			os.WriteFile(p, b, 0o644)
		}, "checkpoint skipped"},
		{"truncated file", func(t *testing.T, root string, m manifestInfo) {
			p := filepath.Join(root, m.ownFile)
			fi, _ := os.Stat(p)
			os.Truncate(p, fi.Size()/2)
		}, "checkpoint skipped"},
		{"missing manifest", func(t *testing.T, root string, m manifestInfo) {
			os.Remove(m.path)
		}, "restored checkpoint"},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			os.Link(input, filepath.Join(dir, "in.jsonl"))
			path := writeConfig(t, dir, crashConfig)
			// Run until at least two checkpoints exist, then kill.
			p := startEddy(t, "run", "-c", path)
			root := filepath.Join(dir, "data", "checkpoints")
			await.True(t, 30*time.Second, `len(manifests(root)) >= 2`, func() bool {
				if p.exited() {
					t.Fatal("the job ended before two checkpoints: make the input longer")
				}
				return len(manifests(root)) >= 2
			})
			p.kill()
			ms := manifests(root)
			newest := ms[len(ms)-1]
			d.damage(t, root, newest)

			out, err := runEddy(t, "run", "-c", path)
			if err != nil {
				t.Fatalf("restart: %v", err)
			}
			if !strings.Contains(out, d.log) {
				t.Fatalf("restart log lacks %q", d.log)
			}
			if d.log == "checkpoint skipped" && !strings.Contains(out, "files/") {
				t.Fatal("the skip does not name the damaged file")
			}
			got := committedRecords(t, filepath.Join(dir, "out"))
			if !slices.Equal(got, want) {
				t.Fatalf("%d records after restoring past the damage, want %d", len(got), len(want))
			}
		})
	}
}

type manifestInfo struct {
	path    string
	id      uint64
	ownFile string // a file the checkpoint itself wrote
}

// manifests lists the complete checkpoints of a store, oldest first.
func manifests(root string) []manifestInfo {
	names, _ := filepath.Glob(filepath.Join(root, "manifests", "*.json"))
	slices.Sort(names)
	var out []manifestInfo
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var m struct {
			ID    uint64
			Files []struct {
				Name       string
				Checkpoint uint64
				Size       int64
			}
		}
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		info := manifestInfo{path: n, id: m.ID}
		for _, f := range m.Files {
			if f.Checkpoint == m.ID && f.Size > 0 {
				info.ownFile = f.Name
			}
		}
		if info.ownFile != "" {
			out = append(out, info)
		}
	}
	return out
}
