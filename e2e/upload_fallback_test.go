package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/scripts/s3server"
)

// TestS3_DamagedNewestManifestRestoresPrevious: a job ships its
// checkpoints to S3 (versitygw); then the newest manifest in the bucket is
// garbled, or a manifest is planted above it (an older one's object under
// a newer name). On a replaced device `eddy restore --from s3://…/gw-1/`
// skips it, says which and why, and restores the checkpoint before it;
// `eddy run` then finishes the job with the uninterrupted run's output.
func TestS3_DamagedNewestManifestRestoresPrevious(t *testing.T) {
	t.Parallel()
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeReadings(t, input, 1000, 400, 9)
	clean := t.TempDir()
	os.Link(input, filepath.Join(clean, "in.jsonl"))
	runToEnd(t, clean)
	want := committedRecords(t, filepath.Join(clean, "out"))
	for i := range want { // the clean run's device is "crash"
		want[i] = strings.Replace(want[i], `"id":"crash/`, `"id":"gw-1/`, 1)
	}

	damages := []struct {
		name string
		// damage damages the bucket's manifests (their paths, oldest first)
		// and returns the checkpoint it made unusable.
		damage func(t *testing.T, manifests []string) uint64
	}{
		{"garbled", func(t *testing.T, ms []string) uint64 {
			newest := ms[len(ms)-1]
			b, err := os.ReadFile(newest)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(newest, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return manifestPathID(t, newest)
		}},
		{"planted", func(t *testing.T, ms []string) uint64 {
			b, err := os.ReadFile(ms[0])
			if err != nil {
				t.Fatal(err)
			}
			id := manifestPathID(t, ms[len(ms)-1]) + 1
			if err := os.WriteFile(filepath.Join(filepath.Dir(ms[0]), fmt.Sprintf("%020d.json", id)), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return id
		}},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			s3 := s3server.Start(t)
			dir := t.TempDir()
			path := writeConfig(t, dir, s3Config, "%INPUT%", input,
				"%S3%", s3.Endpoint(), "%AK%", s3.AccessKey, "%SK%", s3.SecretKey, "%KEY%", strings.Repeat("cd", 32))
			if _, err := runEddy(t, "run", "-c", path); err != nil {
				t.Fatalf("first run: %v", err)
			}
			ms, _ := filepath.Glob(filepath.Join(s3.Dir, "eddy", "gw-1", "manifests", "*.json"))
			slices.Sort(ms)
			if len(ms) < 2 {
				t.Fatalf("%d checkpoints in the bucket, want at least 2", len(ms))
			}
			skipped := d.damage(t, ms)
			previous := manifestPathID(t, ms[len(ms)-1])
			if d.name == "garbled" {
				previous = manifestPathID(t, ms[len(ms)-2])
			}

			// The device is replaced: nothing of its data_dir survives.
			if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
				t.Fatal(err)
			}
			out, err := runEddy(t, "restore", "-c", path, "--from", "s3://eddy/gw-1/")
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			if !strings.Contains(out, fmt.Sprintf("checkpoint %d skipped: it does not verify: ", skipped)) {
				t.Fatalf("the restore does not say checkpoint %d was skipped and why", skipped)
			}
			if !strings.Contains(out, fmt.Sprintf("checkpoint %d restored into data_dir", previous)) {
				t.Fatalf("the restore did not restore checkpoint %d", previous)
			}
			out, err = runEddy(t, "run", "-c", path)
			if err != nil {
				t.Fatalf("second run: %v", err)
			}
			if !strings.Contains(out, fmt.Sprintf(`msg="restored checkpoint" id=%d `, previous)) {
				t.Fatalf("the second run did not restore checkpoint %d", previous)
			}
			got := committedRecords(t, filepath.Join(dir, "out"))
			if !slices.Equal(got, want) {
				t.Fatalf("after restoring from S3: %d records, want %d (the uninterrupted run's)", len(got), len(want))
			}
		})
	}
}

// manifestPathID is the checkpoint id of a manifest object's path.
func manifestPathID(t *testing.T, p string) uint64 {
	t.Helper()
	id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(p), ".json"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
