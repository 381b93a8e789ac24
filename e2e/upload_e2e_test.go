package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/s3server"
)

// s3Config is crashConfig on device gw-1, reading %INPUT%, with its
// checkpoints uploaded to S3 (%S3%, credentials %AK% and %SK%) encrypted with
// %KEY%.
var s3Config = replaceAll(crashConfig,
	`device_id   = "crash"`, `device_id   = "gw-1"`,
	"  log_level   = \"info\"\n", "",
	`path = "%DIR%/in.jsonl"`, `path = "%INPUT%"`,
	"checkpoint {\n  interval = \"100ms\"\n}\n", `checkpoint { interval = "100ms" }
upload "s3" {
  endpoint      = "%S3%"
  bucket        = "eddy"
  secure        = false
  path_style    = true
  create_bucket = true
  access_key    = "%AK%"
  secret_key    = "%SK%"
  encryption_key = "%KEY%"
}
`)

// TestS3_ReplacedDeviceRestores is the upload acceptance test: an agent
// ships its checkpoints to a real S3 server (versitygw) while the server
// is down for a while; it is stopped mid-job, its data_dir wiped (the device
// replaced), `eddy restore --from s3://…` fetches and verifies the newest
// checkpoint, and `eddy run` finishes the job: the committed output equals
// an uninterrupted run's.
func TestS3_ReplacedDeviceRestores(t *testing.T) {
	t.Parallel()
	s3 := s3server.Start(t)
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeReadings(t, input, 1000, 400, 9)

	clean := t.TempDir()
	os.Link(input, filepath.Join(clean, "in.jsonl"))
	runToEnd(t, clean)
	want := committedRecords(t, filepath.Join(clean, "out"))
	for i := range want { // the clean run's device is "crash"
		want[i] = strings.Replace(want[i], `"id":"crash/`, `"id":"gw-1/`, 1)
	}

	dir := t.TempDir()
	key := strings.Repeat("ab", 32)
	path := writeConfig(t, dir, s3Config, "%INPUT%", input,
		"%S3%", s3.Endpoint(), "%AK%", s3.AccessKey, "%SK%", s3.SecretKey, "%KEY%", key)
	// The uplink is down when the device starts: processing and local
	// checkpoints go on, uploads retry.
	s3.Stop()
	first := startEddy(t, "run", "-c", path)
	if !first.waitLog("upload: shipping failed", 60*time.Second) {
		t.Fatal("no upload attempt failed while the uplink was down")
	}
	s3.Restart()
	// Stopped once an upload went through after the outage (or, on a machine
	// fast enough, when the job is already over: the final checkpoint is
	// shipped at shutdown).
	if !await.Holds(60*time.Second, func() bool { return first.logContains("upload: shipping recovered") || first.exited() }) {
		t.Fatal("uploads did not recover within 60 s of the uplink's return")
	}
	first.signal(syscall.SIGTERM)
	<-first.done
	if first.err != nil {
		t.Fatalf("first run: %v", first.err)
	}
	if !first.logContains("checkpoint completed") {
		t.Fatal("no checkpoint before the stop")
	}

	// The device is replaced: nothing of its data_dir survives.
	if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	out, err := runEddy(t, "restore", "-c", path, "--from", "s3://eddy/gw-1/")
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !strings.Contains(out, "restored into data_dir") {
		t.Fatalf("restore output:\n%s", out)
	}
	out, err = runEddy(t, "run", "-c", path)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if !strings.Contains(out, "restored checkpoint") {
		t.Fatal("second run did not restore")
	}
	got := committedRecords(t, filepath.Join(dir, "out"))
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Logf("first difference at record %d:\n got %s\nwant %s", i, got[i], want[i])
				break
			}
		}
		t.Fatalf("after restoring from S3: %d records, want %d (the uninterrupted run's)", len(got), len(want))
	}

	// A checkpoint tampered with in the bucket is refused, naming the object.
	objs, _ := filepath.Glob(filepath.Join(s3.Dir, "eddy", "gw-1", "files", "*.snap"))
	if len(objs) == 0 {
		t.Fatal("no uploaded files found")
	}
	for _, o := range objs {
		b, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		os.WriteFile(o, b, 0o644)
	}
	os.RemoveAll(filepath.Join(dir, "data"))
	out, err = runEddy(t, "restore", "-c", path, "--from", "s3://eddy/gw-1/")
	if err == nil || !strings.Contains(out, "files/") {
		t.Fatalf("tampered restore: err %v, output:\n%s", err, out)
	}
}
