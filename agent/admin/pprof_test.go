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
	if raw := gunzip(t, "the heap profile", b); len(raw) == 0 {
		t.Fatal("the heap profile is empty")
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
// ?debug=1; an unknown one is 404.
func TestServer_NamedProfiles(t *testing.T) {
	srv := testServer(t, newFakeAgent(), Options{})
	for path, want := range map[string]int{
		"/debug/pprof/allocs":            http.StatusOK,
		"/debug/pprof/goroutine?debug=1": http.StatusOK,
		"/debug/pprof/threadcreate":      http.StatusOK,
		"/debug/pprof/nope":              http.StatusNotFound,
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

// TestServer_CPUProfile: /debug/pprof/profile?seconds=N takes the token
// and the loopback rule like the other profiles, answers a CPU profile
// (gzipped protobuf) for N in 1..60, 400 for any other N, and 409 while
// another CPU profile is being taken.
func TestServer_CPUProfile(t *testing.T) {
	const token = "s3cret"
	srv := testServer(t, newFakeAgent(), Options{Token: token})
	if code, _, _ := do(t, srv, "GET", "/debug/pprof/profile?seconds=1", ""); code != http.StatusUnauthorized {
		t.Errorf("without the token = %d, want 401", code)
	}
	code, b, _ := do(t, srv, "GET", "/debug/pprof/profile?seconds=1", token)
	if code != http.StatusOK {
		t.Fatalf("with the token = %d %s", code, b)
	}
	// The profile's sample type names the CPU profiler's unit.
	if raw := gunzip(t, "the CPU profile", b); !bytes.Contains(raw, []byte("nanoseconds")) || !bytes.Contains(raw, []byte("cpu")) {
		t.Fatalf("the CPU profile: %d bytes, want a profile with cpu nanoseconds", len(raw))
	}

	for _, q := range []string{"0", "-1", "61", "1.5", "x", "3600"} {
		if code, b, _ := do(t, srv, "GET", "/debug/pprof/profile?seconds="+q, token); code != http.StatusBadRequest {
			t.Errorf("seconds=%s: %d %s, want 400", q, code, b)
		}
	}

	cpuProfiling.Lock() // as if another request were profiling
	code, b, _ = do(t, srv, "GET", "/debug/pprof/profile?seconds=1", token)
	cpuProfiling.Unlock()
	if code != http.StatusConflict {
		t.Errorf("while another profile runs = %d %s, want 409", code, b)
	}

	// No token configured: loopback peers only, checked before profiling.
	h := New(newFakeAgent(), Options{}).Handler()
	req := httptest.NewRequest("GET", "/debug/pprof/profile?seconds=1", nil)
	req.Host, req.RemoteAddr = "127.0.0.1:8787", "192.168.1.20:50000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden {
		t.Errorf("from 192.168.1.20 without a token configured = %d, want 403", w.Code)
	}
}

// gunzip returns b, the gzipped body of what, unzipped; it fails the test
// if b is not gzip.
func gunzip(t *testing.T, what string, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s is not gzipped: %v", what, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return raw
}
