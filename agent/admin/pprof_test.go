package admin

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestServer_Profiles: /debug/pprof/ takes the token like the API; with
// it, /debug/pprof/heap is a profile (gzipped protobuf). Without a token
// configured, profiles are served to loopback peers only.
func TestServer_Profiles(t *testing.T) {
	const token = "s3cret"
	srv := testServer(t, newFakeAgent(), Options{Token: token})
	for _, path := range []string{"/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if code, _, _ := do(t, srv, "GET", path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token = %d, want 401", path, code)
		}
	}
	code, b, _ := do(t, srv, "GET", "/debug/pprof/heap", token)
	if code != http.StatusOK {
		t.Fatalf("GET /debug/pprof/heap with the token = %d %s", code, b)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the heap profile is not gzipped: %v", err)
	}
	if raw, err := io.ReadAll(zr); err != nil || len(raw) == 0 {
		t.Fatalf("the heap profile: %d bytes, %v", len(raw), err)
	}
	if code, b, _ := do(t, srv, "GET", "/debug/pprof/goroutine?debug=1", token); code != http.StatusOK || !bytes.Contains(b, []byte("goroutine profile:")) {
		t.Errorf("GET /debug/pprof/goroutine?debug=1 with the token = %d, want the text profile", code)
	}

	// No token configured: the peer decides.
	h := New(newFakeAgent(), Options{}).Handler()
	tests := []struct {
		peer string
		want int
	}{
		{"127.0.0.1:50000", http.StatusOK},
		{"[::1]:50000", http.StatusOK},
		{"192.168.1.20:50000", http.StatusForbidden},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("GET", "/debug/pprof/heap", nil)
		req.Host, req.RemoteAddr = "127.0.0.1:8787", tt.peer
		req.Header.Set("Authorization", "Bearer anything") // no token configured: a header is no key
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tt.want {
			t.Errorf("GET /debug/pprof/heap from %s = %d, want %d", tt.peer, w.Code, tt.want)
		}
	}
}

// TestServer_NamedProfiles: every runtime profile is served, as text with
// ?debug=1; an unknown one is 404, and there is no CPU profile.
func TestServer_NamedProfiles(t *testing.T) {
	srv := testServer(t, newFakeAgent(), Options{})
	for path, want := range map[string]int{
		"/debug/pprof/allocs":            http.StatusOK,
		"/debug/pprof/goroutine?debug=1": http.StatusOK,
		"/debug/pprof/threadcreate":      http.StatusOK,
		"/debug/pprof/nope":              http.StatusNotFound,
		"/debug/pprof/profile":           http.StatusNotFound,
	} {
		if code, b, _ := do(t, srv, "GET", path, ""); code != want {
			t.Errorf("GET %s = %d %s, want %d", path, code, b, want)
		}
	}
}

// TestServer_Profiles_NotOnDefaultMux: the profiles are the endpoint's
// own; nothing puts them on http.DefaultServeMux (net/http/pprof would,
// on import).
func TestServer_Profiles_NotOnDefaultMux(t *testing.T) {
	New(newFakeAgent(), Options{})
	if _, pattern := http.DefaultServeMux.Handler(httptest.NewRequest("GET", "/debug/pprof/heap", nil)); pattern != "" {
		t.Errorf("http.DefaultServeMux serves /debug/pprof/ (pattern %q)", pattern)
	}
}
