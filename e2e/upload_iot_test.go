package e2e

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/iotcredentials"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/s3server"
	"github.com/eddy-edge/eddy/scripts/testpki"
)

// TestS3_AWSIoTCredentials: an agent configured with upload "s3" {
// credentials { provider = "aws_iot" } } buys its S3 keys with its device
// certificate from an AWS IoT credentials endpoint (loopback HTTPS with a
// client-certificate check, keys valid for 3 s) and uploads to versitygw
// over several lifetimes without a failed upload, fetching each time before
// the keys expire. With the endpoint down past expiry, uploads pause; the
// outage is logged once; when it is back, uploads resume, still without a
// failed attempt. The secret appears nowhere: log, /metrics, /api/*,
// status page.
func TestS3_AWSIoTCredentials(t *testing.T) {
	s3 := s3server.Start(t)
	s3.MakeBucket("eddy")
	pki := testpki.New(t, "gw-1")
	iot := iotcredentials.Start(t, pki, "gw-1", "eddy-upload", s3.AccessKey, s3.SecretKey, 3*time.Second)
	dir := t.TempDir()
	ag := startAgent(t, dir, `
agent {
  device_id = "gw-1"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices = 20
  rate    = 200
}
sink "file" "out" { path = "%DIR%/out" }
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
checkpoint { interval = "300ms" }
upload "s3" {
  endpoint   = "%S3%"
  bucket     = "eddy"
  secure     = false
  path_style = true
  region     = "us-east-1"
  credentials {
    provider   = "aws_iot"
    endpoint   = "%IOT%"
    role_alias = "eddy-upload"
    cert_file  = "%CERT%"
    key_file   = "%KEY%"
    ca_file    = "%CA%"
  }
}
`, "%BROKER%", loopback.Addr(t), "%S3%", s3.Endpoint(), "%IOT%", iot.Endpoint(),
		"%CERT%", pki.CertFile, "%KEY%", pki.KeyFile, "%CA%", pki.CAFile)
	metric := func(name string) float64 { return metricValue(t, ag.admin, name) }

	// Several lifetimes of uploads.
	await.True(t, 90*time.Second, `f >= 4 && metric("eddy_upload_last_id") > 0`, func() bool { f, _ := iot.Counts(); return f >= 4 && metric("eddy_upload_last_id") > 0 })
	at, expires := iot.Fetches()
	for i := 1; i < len(at); i++ {
		if !at[i].Before(expires[i-1]) {
			t.Errorf("fetch %d at %v, after the previous keys expired at %v", i, at[i], expires[i-1])
		}
	}
	if n := metric("eddy_upload_failures_total"); n != 0 {
		t.Fatalf("%v failed uploads while the keys were refreshed", n)
	}

	// The endpoint down past the keys' expiry: uploads pause.
	iot.SetDown(true)
	_, expires = iot.Fetches()
	await.True(t, 60*time.Second, `time.Now().After(expires[len(expires)-1]) && refused >= 3`, func() bool {
		_, refused := iot.Counts()
		return time.Now().After(expires[len(expires)-1]) && refused >= 3
	})
	paused := metric("eddy_upload_last_id")
	iot.SetDown(false)
	await.True(t, 90*time.Second, `metric("eddy_upload_last_id") > paused`, func() bool { return metric("eddy_upload_last_id") > paused })
	if n := metric("eddy_upload_failures_total"); n != 0 {
		t.Errorf("%v failed uploads, want 0: uploads wait for keys", n)
	}

	for _, path := range []string{"/metrics", "/api/agent", "/api/pipelines", "/api/checkpoints", "/"} {
		resp, err := http.Get("http://" + ag.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), s3.SecretKey) {
			t.Errorf("%s shows the secret key", path)
		}
	}
	ag.stop(syscall.SIGTERM, 20*time.Second)
	out := ag.output()
	if n := strings.Count(out, "fetching S3 credentials failed"); n != 1 {
		t.Errorf("the credentials outage was logged %d times, want once", n)
	}
	if strings.Contains(out, s3.SecretKey) {
		t.Error("the log shows the secret key")
	}
}
