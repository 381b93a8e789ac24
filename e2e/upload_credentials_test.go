package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/s3server"
)

// TestS3_WrongCredentials: an agent whose upload credentials the S3 server
// (versitygw) rejects says so clearly, keeps processing and checkpointing
// locally, shows the upload backlog and recovery-point lag growing in its
// metrics and the failure in /readyz (a warning: it stays ready), and loses
// nothing: once the credentials are fixed, the next start uploads the newest
// checkpoint, and a device replaced from the bucket restores it.
func TestS3_WrongCredentials(t *testing.T) {
	s3 := s3server.Start(t)
	s3.MakeBucket("eddy")
	dir := t.TempDir()
	const cfgTemplate = `
agent {
  device_id = "gw-1"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices = 50
  rate    = 500
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "counts" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "1s"
  }
  aggregate { n = count() }
  to = [sink.file.out]
}
checkpoint { interval = "200ms" }
upload "s3" {
  endpoint   = "%S3%"
  bucket     = "eddy"
  secure     = false
  path_style = true
  access_key = "%AK%"
  secret_key = "%SK%"
}
`
	config := func(secret string) string {
		return replaceAll(cfgTemplate, "%BROKER%", loopback.Addr(t), "%S3%", s3.Endpoint(), "%AK%", s3.AccessKey, "%SK%", secret)
	}
	ag := startAgent(t, dir, config(strings.Repeat("0", len(s3.SecretKey))))
	metric := func(name string) float64 { return metricValue(t, ag.admin, name) }
	readings := func() uint64 {
		if st := ag.status(t); len(st) == 1 {
			return st[0].ReadingsIn
		}
		return 0
	}

	// Processing and local checkpoints go on; uploads fail and queue up.
	await.True(t, 60*time.Second, `metric("eddy_checkpoints_completed_total") >= 5 && metric("eddy_upload_failures_total") >= 2 && metric("eddy_upload_pending_checkpoints") >= 2`, func() bool {
		return metric("eddy_checkpoints_completed_total") >= 5 && metric("eddy_upload_failures_total") >= 2 &&
			metric("eddy_upload_pending_checkpoints") >= 2
	})
	lag0, ckpt0, in0 := metric("eddy_upload_recovery_point_lag_seconds"), metric("eddy_checkpoints_completed_total"), readings()
	if !await.Holds(60*time.Second, func() bool {
		return metric("eddy_upload_recovery_point_lag_seconds") > lag0 && metric("eddy_checkpoints_completed_total") > ckpt0 && readings() > in0
	}) {
		t.Errorf("within 60 s: recovery point lag %v s (was %v), local checkpoints %v (were %v), readings %d (were %d): want all growing",
			metric("eddy_upload_recovery_point_lag_seconds"), lag0, metric("eddy_checkpoints_completed_total"), ckpt0, readings(), in0)
	}
	if id := metric("eddy_upload_last_id"); id != 0 {
		t.Errorf("eddy_upload_last_id = %v with wrong credentials", id)
	}

	// /readyz names the problem, and the agent stays ready.
	resp, err := http.Get("http://" + ag.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var rd struct {
		Ready  bool
		Checks []struct {
			Name    string
			OK      bool
			Warning bool
			Detail  string
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&rd)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !rd.Ready {
		t.Fatalf("/readyz: %d, ready %v (%v): %+v", resp.StatusCode, rd.Ready, err, rd.Checks)
	}
	var upload string
	for _, c := range rd.Checks {
		if c.Name == "upload" && c.Warning {
			upload = c.Detail
		}
	}
	if !strings.Contains(upload, "rejected the credentials") || !strings.Contains(upload, "checkpoints waiting") {
		t.Errorf("/readyz upload check: %q", upload)
	}
	ag.stop(syscall.SIGTERM, 20*time.Second) // a final checkpoint, local only

	if !ag.logContains("S3 upload not possible yet; checkpoints stay local and uploads retry") ||
		!ag.logContains("S3 rejected the credentials") {
		t.Error("no clear credentials error in the log")
	}
	if objs, _ := filepath.Glob(filepath.Join(s3.Dir, "eddy", "gw-1", "manifests", "*")); len(objs) != 0 {
		t.Fatalf("manifests in the bucket despite wrong credentials: %v", objs)
	}
	manifests, _ := filepath.Glob(filepath.Join(dir, "data", "checkpoints", "manifests", "*.json"))
	if len(manifests) == 0 {
		t.Fatal("no local checkpoint kept")
	}
	newest := filepath.Base(manifests[len(manifests)-1])

	// Credentials fixed: the next start ships the newest local checkpoint.
	ag = startAgent(t, dir, config(s3.SecretKey))
	await.True(t, 60*time.Second, `metric("eddy_upload_last_id") > 0`, func() bool { return metric("eddy_upload_last_id") > 0 })
	ag.stop(syscall.SIGTERM, 20*time.Second)

	// A device replaced from the bucket gets at least the checkpoint the
	// first run ended with.
	os.Rename(filepath.Join(dir, "data"), filepath.Join(dir, "old-data"))
	out, err := runEddy(t, "restore", "-c", filepath.Join(dir, "agent.hcl"), "--from", "s3://eddy/gw-1/")
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	m := regexp.MustCompile(`checkpoint (\d+) restored into data_dir`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("restore output: %s", out)
	}
	restored, _ := strconv.ParseUint(m[1], 10, 64)
	first, err := strconv.ParseUint(strings.TrimSuffix(newest, ".json"), 10, 64)
	if err != nil {
		t.Fatalf("manifest name %q: %v", newest, err)
	}
	if restored < first {
		t.Errorf("restored checkpoint %d from the bucket, older than the first run's last (%d)", restored, first)
	}
}
