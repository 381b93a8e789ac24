package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// TestAdmin_Profiles runs the real binary with an admin token:
// /debug/pprof/ refuses a request without the token (401) and, with it,
// serves goroutine stacks as text, and a heap profile and a one-second CPU
// profile as gzipped protobuf.
func TestAdmin_Profiles(t *testing.T) {
	const token = "pprof-s3cret"
	dir := t.TempDir()
	cfg := strings.Replace(guardedAdminConfig, `admin     = "%ADMIN%"`, `admin       = "%ADMIN%"
  admin_token = "`+token+`"`, 1)
	p := startAgent(t, dir, cfg, "%BROKER%", loopback.Addr(t))

	get := func(path, tok string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+p.admin+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	for _, path := range []string{"/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/profile?seconds=1"} {
		if code, _ := get(path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token = %d, want 401", path, code)
		}
	}
	if code, b := get("/debug/pprof/goroutine?debug=1", token); code != http.StatusOK || !bytes.Contains(b, []byte("goroutine profile:")) {
		t.Errorf("GET /debug/pprof/goroutine?debug=1 with the token = %d, want the text profile", code)
	}
	// A profile is gzipped protobuf: the gzip magic, and more than a header.
	if code, b := get("/debug/pprof/heap", token); code != http.StatusOK || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) || len(b) < 100 {
		t.Fatalf("GET /debug/pprof/heap with the token = %d, %d bytes, want a gzipped profile", code, len(b))
	}
	if code, b := get("/debug/pprof/profile?seconds=1", token); code != http.StatusOK || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) || len(b) < 100 {
		t.Fatalf("GET /debug/pprof/profile?seconds=1 with the token = %d, %d bytes, want a gzipped profile", code, len(b))
	}
}
