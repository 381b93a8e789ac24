package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/s3server"
)

const uploadBacklogConfig = `
agent {
  device_id = "gw-backlog"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices = 5
  rate    = 50
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to = [sink.file.out]
}
checkpoint { interval = "200ms" }
upload "s3" {
  endpoint      = "%S3%"
  bucket        = "eddy"
  secure        = false
  path_style    = true
  create_bucket = true
  access_key    = "%AK%"
  secret_key    = "%SK%"
}
`

// uploadBacklog is the upload section of /api/agent; ok is false while the
// endpoint does not answer.
type uploadBacklog struct {
	Checkpoints *int64 `json:"backlog_checkpoints"`
	Files       *int64 `json:"backlog_files"`
	LagMs       *int64 `json:"recovery_point_lag_ms"`
}

func agentUpload(admin string) (u uploadBacklog, ok bool) {
	resp, err := http.Get("http://" + admin + "/api/agent")
	if err != nil {
		return u, false
	}
	defer resp.Body.Close()
	var r struct {
		Upload *uploadBacklog `json:"upload"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&r) != nil || r.Upload == nil {
		return u, false
	}
	return *r.Upload, true
}

// TestS3_AgentReportsUploadBacklog: while the S3 server (versitygw) is
// down, /api/agent reports the checkpoints waiting for upload, the files
// they still need in the bucket and the recovery-point lag, as numbers,
// and the status page shows them; once the server is back the backlog
// drains to zero.
func TestS3_AgentReportsUploadBacklog(t *testing.T) {
	t.Parallel()
	s3 := s3server.Start(t)
	dir := t.TempDir()
	ag := startAgent(t, dir, uploadBacklogConfig, "%BROKER%", loopback.Addr(t),
		"%S3%", s3.Endpoint(), "%AK%", s3.AccessKey, "%SK%", s3.SecretKey)
	if !ag.waitLog("checkpoint completed", 30*time.Second) {
		t.Fatal("no checkpoint completed")
	}
	await.True(t, 30*time.Second, `ok && u.Checkpoints != nil && u.Files != nil && u.LagMs != nil`, func() bool {
		u, ok := agentUpload(ag.admin)
		return ok && u.Checkpoints != nil && u.Files != nil && u.LagMs != nil
	})

	s3.Stop()
	if !ag.waitLog("upload: shipping failed", 60*time.Second) {
		t.Fatal("no upload attempt failed while the S3 server was down")
	}
	var u uploadBacklog
	await.True(t, 60*time.Second, `ok && u.Checkpoints != nil && *u.Checkpoints > 0 && u.Files != nil && *u.Files > *u.Checkpoints && u.LagMs != nil && *u.LagMs >= 1000`, func() bool {
		var ok bool
		u, ok = agentUpload(ag.admin)
		return ok && u.Checkpoints != nil && *u.Checkpoints > 0 && u.Files != nil && *u.Files > *u.Checkpoints &&
			u.LagMs != nil && *u.LagMs >= 1000
	})
	t.Logf("while down: %d checkpoints, %d files, lag %d ms", *u.Checkpoints, *u.Files, *u.LagMs)

	resp, err := http.Get("http://" + ag.admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`backlog \d+ checkpoints \(\d+ files\), recovery-point lag [0-9.]+ (s|min)`).Find(page); m == nil {
		t.Errorf("the status page does not show the backlog: %s", page)
	}

	s3.Restart()
	await.True(t, 90*time.Second, `ok && u.Checkpoints != nil && *u.Checkpoints <= 1 && u.LagMs != nil && *u.LagMs < 5000`, func() bool {
		u, ok := agentUpload(ag.admin)
		return ok && u.Checkpoints != nil && *u.Checkpoints <= 1 && u.LagMs != nil && *u.LagMs < 5000
	})
}
