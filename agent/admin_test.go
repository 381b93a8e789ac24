package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/agent/introspect"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// testConfig: an MQTT source on a broker nobody listens on (build does not
// connect), an event-time pipeline without late_output, an upload block
// (not wired: the admin only reports it) and no exactly-once sink.
const testConfig = `
agent {
  device_id = "gw-test"
  data_dir  = "%DATA%"
}
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1"
  topics = ["sensors/+/telemetry"]
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "2s" }
}
sink "file" "out" { path = "out.jsonl" }
pipeline "temps" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.file.out]
}
checkpoint { tolerable_failures = 2 }
upload "s3" {
  endpoint = "minio.local:9000"
  bucket   = "eddy"
}
`

// mustBuildAgent builds (without running) the agent of src, with %DATA%
// replaced by a temporary directory, and closes what build opened when the
// test ends. With checkpoints set, the checkpointer exists but its
// goroutine does not run.
func mustBuildAgent(t testing.TB, src string, checkpoints bool) *Agent {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.hcl")
	src = strings.ReplaceAll(src, "%DATA%", filepath.Join(dir, "data"))
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := build(loadedConfig{cfg: cfg, src: []byte(src)}, log, Options{Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, be := range a.flow.backends {
			_ = be.Close()
		}
		for _, l := range a.flow.logs {
			_ = l.Close()
		}
		if a.flow.broker != nil {
			_ = a.flow.broker.Close()
		}
	})
	if checkpoints {
		if err := a.setupCheckpoints(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// startAgent runs the agent of src in this process (Run) until the test
// ends. It writes src to dir/agent.hcl with %DATA% replaced by dir/data and
// %DIR% by dir, and the agent's log (Options.Stderr) to dir/agent.log. It
// returns once the agent is ready (Options.Ready); it fails the test if Run
// returns first or the agent is not ready within 30 s. When the test ends,
// in a cleanup registered here, the agent's context is cancelled and the
// cleanup waits for Run to return: an error from it fails the test, and the
// log is printed if the test failed.
func startAgent(t *testing.T, dir, src string) *Agent {
	t.Helper()
	return startAgentWith(t, dir, src, Options{})
}

// startAgentWith is startAgent with opts (Stdout, Stderr and Ready are set
// here).
func startAgentWith(t *testing.T, dir, src string, opts Options) *Agent {
	t.Helper()
	src = strings.ReplaceAll(strings.ReplaceAll(src, "%DATA%", filepath.Join(dir, "data")), "%DIR%", dir)
	path := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "agent.log")
	logw, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *Agent, 1)
	done := make(chan error, 1)
	go func() {
		opts.Stdout, opts.Stderr, opts.Ready = io.Discard, logw, func(a *Agent) { ready <- a }
		done <- Run(ctx, path, opts)
	}()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		}
		logw.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("agent log:\n%s", b)
		}
	})
	select {
	case a := <-ready:
		return a
	case err := <-done:
		stopped = true
		t.Fatalf("agent stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not start")
	}
	return nil
}

// testAdmin is the admin endpoint's handler on a built agent, with a
// settable clock.
type testAdmin struct {
	srv *httptest.Server
	now time.Time
}

// newTestAdmin serves the admin endpoint of a (built, not run) with token,
// its clock at ta.now; edit, if set, changes the options first.
func newTestAdmin(t testing.TB, a *Agent, token string, edit ...func(*admin.Options)) *testAdmin {
	t.Helper()
	ta := &testAdmin{now: time.UnixMilli(1_700_000_000_000)}
	a.intro.Now = func() time.Time { return ta.now }
	opts, err := adminOptions(a.cfg, a.log, a.intro)
	if err != nil {
		t.Fatal(err)
	}
	opts.Token = token
	for _, e := range edit {
		e(&opts)
	}
	a.intro.RegisterMetrics()
	ta.srv = httptest.NewServer(admin.New(a.intro, opts).Handler())
	t.Cleanup(ta.srv.Close)
	return ta
}

// do sends a request and returns the status and body.
func (ta *testAdmin) do(t *testing.T, method, path, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, ta.srv.URL+path, nil)
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

// getJSON fetches path, checks the status and decodes the body into v.
func (ta *testAdmin) getJSON(t *testing.T, path string, wantCode int, v any) {
	t.Helper()
	code, b, h := ta.do(t, http.MethodGet, path, "")
	if code != wantCode {
		t.Fatalf("GET %s: %d %s, want %d", path, code, b, wantCode)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

func TestAdmin_Healthz(t *testing.T) {
	ta := newTestAdmin(t, mustBuildAgent(t, testConfig, true), "")
	var h map[string]any
	ta.getJSON(t, "/healthz", http.StatusOK, &h)
	if h["status"] != "ok" || h["device_id"] != "gw-test" {
		t.Errorf("healthz = %v", h)
	}
}

// TestAdmin_Readyz_SourceDisconnected: the MQTT source is down from the
// start; ready until it has been down for maxDisconnected.
func TestAdmin_Readyz_SourceDisconnected(t *testing.T) {
	ta := newTestAdmin(t, mustBuildAgent(t, testConfig, true), "")
	var rd admin.Readiness
	ta.getJSON(t, "/readyz", http.StatusOK, &rd)
	ta.now = ta.now.Add(introspect.DefaultMaxDisconnected - time.Millisecond)
	ta.getJSON(t, "/readyz", http.StatusOK, &rd)
	ta.now = ta.now.Add(time.Millisecond)
	for _, path := range []string{"/readyz", "/healthz?ready=1"} {
		rd = admin.Readiness{}
		ta.getJSON(t, path, http.StatusServiceUnavailable, &rd)
		if rd.Ready || !hasFailed(rd, "source/sensors") {
			t.Errorf("%s = %+v, want source/sensors failing", path, rd)
		}
	}
	// Liveness is not readiness.
	var h map[string]any
	ta.getJSON(t, "/healthz", http.StatusOK, &h)
}

func hasFailed(rd admin.Readiness, name string) bool {
	for _, c := range rd.Checks {
		if c.Name == name && !c.OK {
			return true
		}
	}
	return false
}

// TestAdmin_Readyz_CheckpointFailures: tolerable_failures = 2, so two
// aborted checkpoints in a row make the agent not ready (one more and it
// stops); a completed one makes it ready again.
func TestAdmin_Readyz_CheckpointFailures(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	ta := newTestAdmin(t, a, "")
	a.intro.MaxDisconnected = time.Hour
	var rd admin.Readiness
	a.ckpt.Record(admin.CheckpointRecord{ID: 1, Kind: "full", Aborted: "checkpoint: timed out"})
	ta.getJSON(t, "/readyz", http.StatusOK, &rd)
	a.ckpt.Record(admin.CheckpointRecord{ID: 2, Kind: "full", Aborted: "checkpoint: timed out"})
	ta.getJSON(t, "/readyz", http.StatusServiceUnavailable, &rd)
	if !hasFailed(rd, "checkpoints") {
		t.Errorf("readyz = %+v, want checkpoints failing", rd)
	}
	a.ckpt.Record(admin.CheckpointRecord{ID: 3, Kind: "full"})
	ta.getJSON(t, "/readyz", http.StatusOK, &rd)
}

func TestAdmin_Pipelines(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	// The counters as the pipeline's stages leave them (the stages' own
	// tests check what they count and how Status reports it).
	c := &fixedCounters{}
	s := introspectSetup(a)
	s.Pipelines[0].Counters = c
	a.intro = introspect.New(s, introspection{a})
	ta := newTestAdmin(t, a, "")
	var got []map[string]any
	ta.getJSON(t, "/api/pipelines", http.StatusOK, &got)
	if len(got) != 1 || got[0]["name"] != "temps" || got[0]["watermark_ms"] != nil || got[0]["watermark_lag_ms"] != nil ||
		got[0]["event_time"] != true || got[0]["late_output"] != false {
		t.Fatalf("before any reading: %v", got)
	}
	wm := ta.now.UnixMilli() - 2_500
	c.set(admin.PipelineStatus{ReadingsIn: 10, Late: 3, Unassigned: 2, DeadLettered: 4, WatermarkMs: &wm}, map[string]uint64{"bad_json": 4})
	ta.getJSON(t, "/api/pipelines", http.StatusOK, &got)
	want := map[string]any{"readings_in": 10.0, "late": 3.0, "unassigned": 2.0, "dropped": 5.0, "dead_lettered": 4.0,
		"watermark_ms": float64(wm), "watermark_lag_ms": 2500.0, "parallelism": 1.0}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("%s = %v, want %v", k, got[0][k], v)
		}
	}
	if r, _ := got[0]["dead_lettered_by_reason"].(map[string]any); r["bad_json"] != 4.0 {
		t.Errorf("dead_lettered_by_reason = %v", got[0]["dead_lettered_by_reason"])
	}
}

// fixedCounters are a pipeline's counters with values the test sets.
type fixedCounters struct {
	mu     sync.Mutex // the admin server reads them
	status admin.PipelineStatus
	dead   map[string]uint64
}

func (c *fixedCounters) set(st admin.PipelineStatus, dead map[string]uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status, c.dead = st, dead
}

func (c *fixedCounters) Status() admin.PipelineStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

func (c *fixedCounters) DeadLetteredByReason() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.dead)
}

func (c *fixedCounters) State() *admin.StateReport { return nil }

func TestAdmin_Checkpoints(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	ta := newTestAdmin(t, a, "")
	a.ckpt.Record(admin.CheckpointRecord{ID: 1, Kind: "full", DurationMs: 12, SizeBytes: 2048})
	a.ckpt.Record(admin.CheckpointRecord{ID: 2, Kind: "incremental", Aborted: "checkpoint: timed out"})
	var rep admin.CheckpointReport
	ta.getJSON(t, "/api/checkpoints", http.StatusOK, &rep)
	if len(rep.History) != 2 || rep.History[0].ID != 1 || rep.History[1].Aborted == "" {
		t.Errorf("history = %+v", rep.History)
	}
	if rep.ConsecutiveFailures != 1 || rep.TolerableFailures != 2 || rep.IntervalMs != 10_000 || rep.Retain != 3 {
		t.Errorf("stats = %+v", rep)
	}

	// Without checkpoints set up there is nothing to report.
	ta2 := newTestAdmin(t, mustBuildAgent(t, testConfig, false), "")
	var e map[string]string
	ta2.getJSON(t, "/api/checkpoints", http.StatusServiceUnavailable, &e)
}

func TestAdmin_Savepoint_Errors(t *testing.T) {
	// The checkpointer exists but does not run: the savepoint never
	// completes, and the admin's own deadline answers 504.
	ta := newTestAdmin(t, mustBuildAgent(t, testConfig, true), "", func(o *admin.Options) { o.SavepointTimeout = 20 * time.Millisecond })
	if code, b, _ := ta.do(t, http.MethodPost, "/api/savepoint", ""); code != http.StatusGatewayTimeout || !strings.Contains(string(b), "did not complete") {
		t.Errorf("POST /api/savepoint = %d %s, want 504", code, b)
	}
	if code, _, _ := ta.do(t, http.MethodGet, "/api/savepoint", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/savepoint = %d, want 405", code)
	}
	ta2 := newTestAdmin(t, mustBuildAgent(t, testConfig, false), "")
	if code, _, _ := ta2.do(t, http.MethodPost, "/api/savepoint", ""); code != http.StatusServiceUnavailable {
		t.Errorf("POST /api/savepoint without checkpoints = %d, want 503", code)
	}
}

func TestAdmin_AgentInfo(t *testing.T) {
	ta := newTestAdmin(t, mustBuildAgent(t, testConfig, true), "")
	var got map[string]any
	ta.getJSON(t, "/api/agent", http.StatusOK, &got)
	if got["device_id"] != "gw-test" {
		t.Errorf("device_id = %v", got["device_id"])
	}
	srcs, _ := got["sources"].([]any)
	if len(srcs) != 1 {
		t.Fatalf("sources = %v", got["sources"])
	}
	s := srcs[0].(map[string]any)
	if s["name"] != "sensors" || s["kind"] != "mqtt" || s["tracked"] != true || s["connected"] != false || s["disconnected_ms"] != 0.0 {
		t.Errorf("source = %v", s)
	}
	if ing, _ := got["ingest"].([]any); len(ing) != 1 || ing[0].(map[string]any)["max_disk_bytes"] != float64(1<<30) {
		t.Errorf("ingest = %v", got["ingest"])
	}
	if wal, ok := got["wal"].([]any); !ok || len(wal) != 0 {
		t.Errorf("wal = %v, want []", got["wal"])
	}
	if up, _ := got["upload"].(map[string]any); up["bucket"] != "eddy" || up["prefix"] != "gw-test/" || up["backlog_files"] != nil {
		t.Errorf("upload = %v", got["upload"])
	}
}

func TestAdmin_Metrics(t *testing.T) {
	ta := newTestAdmin(t, mustBuildAgent(t, testConfig, true), "")
	code, b, h := ta.do(t, http.MethodGet, "/metrics", "")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %q", code, h.Get("Content-Type"))
	}
	for _, want := range []string{
		`eddy_readings_in_total{pipeline="temps"} 0`,
		`eddy_watermark_lag_ms{pipeline="temps"} 0`,
		`eddy_readings_dropped_total{pipeline="temps"} 0`,
		`eddy_checkpoint_consecutive_failures 0`,
		`eddy_ready 1`,
		`eddy_mqtt_connected{source="sensors"} 0`,
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestStatusPage(t *testing.T) {
	a := mustBuildAgent(t, testConfig, true)
	a.metrics.GetOrCreateCounter(`eddy_readings_in_total{pipeline="temps"}`).Add(42) // the pipeline's own counter
	a.ckpt.Record(admin.CheckpointRecord{ID: 7, Kind: "full", Time: "2026-01-02T03:04:05.123456789Z", DurationMs: 1500, SizeBytes: 3 << 20})
	ta := newTestAdmin(t, a, "")
	code, b, h := ta.do(t, "GET", "/", "")
	if code != http.StatusOK || h.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / = %d %q", code, h.Get("Content-Type"))
	}
	page := string(b)
	for _, want := range []string{
		`<tr data-pipeline="temps"><th scope="row">temps</th><td data-field="readings_in">42</td>`,
		`<td data-field="watermark_lag">no watermark yet</td>`,
		`<td data-field="state">0 windows, 0 B</td>`,
		`<td>7</td><td>full</td><td>2026-01-02T03:04:05Z</td><td>1.5 s</td><td>3.0 MiB</td>`,
		`<div id="wal"><p>Not configured.</p></div>`,
		`To minio.local:9000/eddy/gw-test/; backlog not reported yet`,
		`data-ready="true"`,
		`<script src="static/status.js"></script>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, path := range []string{"/static/status.js", "/static/status.css"} {
		if code, _, _ := ta.do(t, "GET", path, ""); code != http.StatusOK {
			t.Errorf("GET %s = %d", path, code)
		}
	}
	if code, _, _ := ta.do(t, "GET", "/static/index.html", ""); code != http.StatusNotFound {
		t.Errorf("GET /static/index.html = %d, want 404 (the template is served rendered at /)", code)
	}
}

// TestAdmin_Savepoint_Running runs a real agent (simulator on the embedded
// broker, checkpoints every 200ms) and takes a savepoint through the API.
func TestAdmin_Savepoint_Running(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent")
	}
	dir := t.TempDir()
	a := startAgent(t, dir, `
agent {
  device_id = "sp"
  data_dir  = "%DATA%"
  admin     = "127.0.0.1:0"
}
broker { listen = "`+loopback.Addr(t)+`" }
source "simulator" "sim" {
  devices = 3
  rate    = 100
}
sink "file" "out" { path = "out.jsonl" }
pipeline "temps" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to = [sink.file.out]
}
checkpoint { interval = "200ms" }
`)
	base := "http://" + a.AdminAddr()
	resp, err := http.Post(base+"/api/savepoint", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sp map[string]any
	err = json.NewDecoder(resp.Body).Decode(&sp)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/savepoint = %d %v %v", resp.StatusCode, sp, err)
	}
	id, _ := sp["id"].(float64)
	if id < 1 {
		t.Fatalf("savepoint id = %v", sp["id"])
	}
	resp, err = http.Get(base + "/api/checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	var rep admin.CheckpointReport
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rep.History {
		found = found || (r.Kind == "savepoint" && r.Aborted == "" && float64(r.ID) <= id)
	}
	if !found || rep.Completed == 0 {
		t.Errorf("no completed savepoint in %+v", rep)
	}
}

// TestAdmin_WAL: an exactly-once MQTT sink has a WAL; the admin reports it
// from the eddy_wal_* gauges the WAL sink registers.
func TestAdmin_WAL(t *testing.T) {
	cfg := strings.Replace(testConfig, `sink "file" "out" { path = "out.jsonl" }`, `sink "mqtt" "out" {
  broker   = "tcp://127.0.0.1:1"
  topic    = "results/${key}"
  delivery = "exactly_once"
}`, 1)
	cfg = strings.Replace(cfg, "to = [sink.file.out]", "to = [sink.mqtt.out]", 1)
	a := mustBuildAgent(t, cfg, true)
	defer func() {
		for _, s := range a.flow.sinks {
			if s.tx != nil {
				_ = s.tx.Close()
			}
		}
	}()
	ta := newTestAdmin(t, a, "")
	var got admin.AgentReport
	ta.getJSON(t, "/api/agent", http.StatusOK, &got)
	if len(got.WAL) != 1 {
		t.Fatalf("wal = %+v", got.WAL)
	}
	w := got.WAL[0]
	if w.Sink != "out" || w.MaxDiskBytes != 512<<20 || w.WhenFull != "block" || w.DiskBytes == nil || w.BacklogBytes == nil ||
		*w.BacklogBytes != 0 || w.Connected == nil {
		t.Errorf("wal = %+v", w)
	}
	var rd admin.Readiness
	ta.getJSON(t, "/readyz", http.StatusOK, &rd)
	if !hasCheck(rd, "wal/out") {
		t.Errorf("readyz lacks wal/out: %+v", rd)
	}
	_, page, _ := ta.do(t, "GET", "/", "")
	if !strings.Contains(string(page), `<tr><th scope="row">out</th><td>0 B</td>`) {
		t.Errorf("the page lacks the WAL row:\n%s", page)
	}
}

func hasCheck(rd admin.Readiness, name string) bool {
	for _, c := range rd.Checks {
		if c.Name == name {
			return true
		}
	}
	return false
}

// The admin's cost per request; none of it is on the readings' path.
func BenchmarkAdmin(b *testing.B) {
	for _, path := range []string{"/api/pipelines", "/api/checkpoints", "/readyz", "/metrics", "/"} {
		b.Run("GET "+path, func(b *testing.B) {
			a := mustBuildAgent(b, testConfig, true)
			a.intro.MaxDisconnected = time.Hour
			opts, err := adminOptions(a.cfg, a.log, a.intro)
			if err != nil {
				b.Fatal(err)
			}
			h := admin.New(a.intro, opts).Handler()
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = "127.0.0.1:8787"
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d", path, w.Code)
				}
			}
		})
	}
}
