package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
)

// fakeAgent answers with fixed reports; savepoint, when set, takes the
// savepoints.
type fakeAgent struct {
	ready       Readiness
	pipelines   []PipelineReport
	checkpoints *CheckpointReport
	report      AgentReport
	savepoint   func(ctx context.Context) (uint64, error)
}

func (f *fakeAgent) DeviceID() string            { return "gw-test" }
func (f *fakeAgent) Readiness() Readiness        { return f.ready }
func (f *fakeAgent) Pipelines() []PipelineReport { return f.pipelines }
func (f *fakeAgent) Report() AgentReport         { return f.report }
func (f *fakeAgent) WriteMetrics(w io.Writer)    { fmt.Fprintln(w, "eddy_ready 1") }

func (f *fakeAgent) Checkpoints() (CheckpointReport, bool) {
	if f.checkpoints == nil {
		return CheckpointReport{}, false
	}
	return *f.checkpoints, true
}

func (f *fakeAgent) Savepoint(ctx context.Context) (uint64, error) {
	if f.savepoint == nil {
		return 0, ErrNotStarted
	}
	return f.savepoint(ctx)
}

// newFakeAgent is ready, has one pipeline, checkpoints and an upload.
func newFakeAgent() *fakeAgent {
	wm := int64(1_700_000_000_000)
	return &fakeAgent{
		ready:       Readiness{Ready: true, Checks: []Check{{Name: "checkpoints", OK: true, Detail: "0 failed in a row"}}},
		pipelines:   []PipelineReport{{PipelineStatus: PipelineStatus{Name: "temps", ReadingsIn: 42, WatermarkMs: &wm, Parallelism: 1}, EventTime: true}},
		checkpoints: &CheckpointReport{TolerableFailures: 2, History: []CheckpointRecord{{ID: 7, Kind: "full"}}},
		report:      AgentReport{DeviceID: "gw-test", Sources: []SourceReport{}, Ingest: []IngestReport{}, WAL: []WALReport{}, Upload: &UploadReport{Endpoint: "minio.local:9000", Bucket: "eddy"}},
	}
}

// testServer serves a's endpoint with opts on a loopback httptest server.
func testServer(t *testing.T, a Agent, opts Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(a, opts).Handler())
	t.Cleanup(srv.Close)
	return srv
}

// do sends a request with the token, if any, and returns the status, body
// and headers.
func do(t *testing.T, srv *httptest.Server, method, path, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
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
	return resp.StatusCode, b, resp.Header
}

func TestServer_Token(t *testing.T) {
	const token = "s3cret"
	srv := testServer(t, newFakeAgent(), Options{Token: token})
	tests := []struct {
		method, path, token string
		want                int
	}{
		// Probes carry no token: up and ready answer, revealing nothing else.
		{"GET", "/healthz", "", http.StatusOK},
		{"GET", "/healthz", "wrong", http.StatusOK},
		{"GET", "/healthz", token, http.StatusOK},
		{"GET", "/readyz", "", http.StatusOK},
		{"GET", "/metrics", "", http.StatusUnauthorized},
		{"GET", "/api/pipelines", "", http.StatusUnauthorized},
		{"GET", "/api/pipelines", token, http.StatusOK},
		{"GET", "/api/checkpoints", "", http.StatusUnauthorized},
		{"GET", "/api/agent", "", http.StatusUnauthorized},
		{"POST", "/api/savepoint", "", http.StatusUnauthorized},
		{"GET", "/debug/pprof/", "", http.StatusUnauthorized},
		{"GET", "/debug/pprof/heap", "wrong", http.StatusUnauthorized},
		{"GET", "/nope", "", http.StatusUnauthorized},
		// The page's shell and assets carry no figures: public.
		{"GET", "/", "", http.StatusOK},
		{"GET", "/static/status.js", "", http.StatusOK},
		{"GET", "/static/status.css", "", http.StatusOK},
	}
	for _, tt := range tests {
		if code, _, _ := do(t, srv, tt.method, tt.path, tt.token); code != tt.want {
			t.Errorf("%s %s (token %q) = %d, want %d", tt.method, tt.path, tt.token, code, tt.want)
		}
	}
	for path, want := range map[string]string{"/healthz": `{"status":"ok"}`, "/readyz": `{"ready":true}`} {
		if _, b, _ := do(t, srv, "GET", path, ""); strings.TrimSpace(string(b)) != want {
			t.Errorf("GET %s without the token = %s, want %s", path, b, want)
		}
	}
	if _, b, _ := do(t, srv, "GET", "/healthz", token); !strings.Contains(string(b), "gw-test") {
		t.Errorf("GET /healthz with the token = %s, want the device id", b)
	}
	if _, b, _ := do(t, srv, "GET", "/readyz", token); !strings.Contains(string(b), `"checks"`) {
		t.Errorf("GET /readyz with the token = %s, want the checks", b)
	}
	_, page, _ := do(t, srv, "GET", "/", "")
	if strings.Contains(string(page), `data-pipeline="temps"`) || strings.Contains(string(page), "minio.local") {
		t.Errorf("the public page shows figures:\n%s", page)
	}
}

func TestServer_Readyz(t *testing.T) {
	a := newFakeAgent()
	a.ready = Readiness{Checks: []Check{{Name: "source/s", Detail: "disconnected for 1m0s (limit 1m0s)"}}}
	srv := testServer(t, a, Options{})
	for _, path := range []string{"/readyz", "/healthz?ready=1"} {
		code, b, _ := do(t, srv, "GET", path, "")
		var rd Readiness
		if err := json.Unmarshal(b, &rd); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, b)
		}
		if code != http.StatusServiceUnavailable || rd.Ready || len(rd.Checks) != 1 || rd.Checks[0].Name != "source/s" {
			t.Errorf("GET %s = %d %+v, want 503 with source/s failing", path, code, rd)
		}
	}
	// Liveness is not readiness.
	if code, _, _ := do(t, srv, "GET", "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200", code)
	}
}

// TestServer_Savepoint: each error of Agent.Savepoint has its status code.
func TestServer_Savepoint(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"taken", nil, http.StatusOK},
		{"not started", ErrNotStarted, http.StatusServiceUnavailable},
		{"checkpoints failed for good", fmt.Errorf("checkpoint: %w", checkpoint.ErrCoordinatorFailed), http.StatusServiceUnavailable},
		{"max_savepoints kept", fmt.Errorf("%w: 3 kept", ErrTooManySavepoints), http.StatusConflict},
		{"timed out", context.DeadlineExceeded, http.StatusGatewayTimeout},
		{"aborted", errors.New("checkpoint: timed out"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newFakeAgent()
			a.savepoint = func(context.Context) (uint64, error) { return 9, tt.err }
			srv := testServer(t, a, Options{})
			code, b, _ := do(t, srv, "POST", "/api/savepoint", "")
			if code != tt.want {
				t.Fatalf("POST /api/savepoint = %d %s, want %d", code, b, tt.want)
			}
			if tt.err == nil && strings.TrimSpace(string(b)) != `{"id":9}` {
				t.Errorf("body %s, want {\"id\":9}", b)
			}
		})
	}
	t.Run("own deadline", func(t *testing.T) {
		a := newFakeAgent()
		a.savepoint = func(ctx context.Context) (uint64, error) { <-ctx.Done(); return 0, ctx.Err() }
		srv := testServer(t, a, Options{SavepointTimeout: 20 * time.Millisecond})
		if code, b, _ := do(t, srv, "POST", "/api/savepoint", ""); code != http.StatusGatewayTimeout || !strings.Contains(string(b), "did not complete") {
			t.Errorf("POST /api/savepoint = %d %s, want 504", code, b)
		}
	})
	srv := testServer(t, newFakeAgent(), Options{})
	if code, _, _ := do(t, srv, "GET", "/api/savepoint", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/savepoint = %d, want 405", code)
	}
}

func TestServer_Checkpoints_NotStarted(t *testing.T) {
	a := newFakeAgent()
	a.checkpoints = nil
	srv := testServer(t, a, Options{})
	if code, b, _ := do(t, srv, "GET", "/api/checkpoints", ""); code != http.StatusServiceUnavailable {
		t.Errorf("GET /api/checkpoints = %d %s, want 503", code, b)
	}
}

func TestServer_Metrics(t *testing.T) {
	srv := testServer(t, newFakeAgent(), Options{})
	code, b, h := do(t, srv, "GET", "/metrics", "")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || string(b) != "eddy_ready 1\n" {
		t.Errorf("GET /metrics = %d %q %q", code, h.Get("Content-Type"), b)
	}
}

// TestListen serves on a loopback port until Close.
func TestListen(t *testing.T) {
	s, err := Listen(newFakeAgent(), Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %d", resp.StatusCode)
	}
	s.Close()
	if resp, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("answered after Close")
	}
}
