package admin

import (
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	bytesCases := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 4 << 40: "4096.0 GiB"}
	for n, want := range bytesCases {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	msCases := map[int64]string{0: "0 ms", 999: "999 ms", 1000: "1.0 s", 12_345: "12.3 s", 119_999: "120.0 s", 120_000: "2.0 min", -5: "-5 ms"}
	for v, want := range msCases {
		if got := formatMs(v); got != want {
			t.Errorf("formatMs(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestStatusAssets_SelfContained: the page must work on a site network
// without internet access, so nothing it loads may come from elsewhere; and
// it stays small.
func TestStatusAssets_SelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'](https?:)?//`)
	total := 0
	err := fs.WalkDir(statusFS, "status", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := statusFS.ReadFile(path)
		if err != nil {
			return err
		}
		total += len(b)
		if m := external.Find(b); m != nil {
			t.Errorf("%s loads something external: %q", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > 24<<10 {
		t.Errorf("status assets are %d bytes; keep them under 24 KiB", total)
	}
}

// TestServer_StatusPage: the page is rendered with the agent's figures;
// its assets are served, nothing else under /static/.
func TestServer_StatusPage(t *testing.T) {
	a := newFakeAgent()
	a.checkpoints.History = []CheckpointRecord{{ID: 7, Kind: "full", Time: "2026-01-02T03:04:05.123456789Z", DurationMs: 1500, SizeBytes: 3 << 20}}
	srv := testServer(t, a, Options{})
	code, b, h := do(t, srv, "GET", "/", "")
	if code != http.StatusOK || h.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET / = %d %q %q", code, h.Get("Content-Type"), h.Get("Content-Security-Policy"))
	}
	page := string(b)
	for _, want := range []string{
		`<tr data-pipeline="temps"><th scope="row">temps</th><td data-field="readings_in">42</td>`,
		`<td>7</td><td>full</td><td>2026-01-02T03:04:05Z</td><td>1.5 s</td><td>3.0 MiB</td>`,
		`<div id="wal"><p>Not configured.</p></div>`,
		`To minio.local:9000/eddy/; backlog not reported yet`,
		`data-ready="true"`,
		`<script src="static/status.js"></script>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for path, want := range map[string]int{"/static/status.js": http.StatusOK, "/static/status.css": http.StatusOK, "/static/index.html": http.StatusNotFound} {
		if code, _, _ := do(t, srv, "GET", path, ""); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
}

// The upload backlog, once the uploader reports it, is on the page.
func TestServer_StatusPageUploadBacklog(t *testing.T) {
	a := newFakeAgent()
	checkpoints, files, lag := int64(3), int64(11), int64(7_000)
	a.report.Upload.BacklogCheckpoints, a.report.Upload.BacklogFiles, a.report.Upload.RecoveryPointLagMs = &checkpoints, &files, &lag
	srv := testServer(t, a, Options{})
	_, b, _ := do(t, srv, "GET", "/", "")
	if want := `To minio.local:9000/eddy/; backlog 3 checkpoints (11 files), recovery-point lag 7.0 s.`; !strings.Contains(string(b), want) {
		t.Errorf("page lacks %q", want)
	}
}
