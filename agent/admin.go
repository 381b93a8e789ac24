package agent

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/upload"
)

// The admin endpoint (README "Admin endpoint and status page"):
//
//	GET  /healthz          liveness: 200 while the process serves HTTP
//	GET  /readyz           readiness: 200, or 503 with the failing checks
//	GET  /healthz?ready=1  the same as /readyz
//	GET  /metrics          Prometheus text format
//	GET  /api/pipelines    per-pipeline counters, watermark and its lag
//	GET  /api/checkpoints  checkpoint statistics and recent history
//	POST /api/savepoint    takes a savepoint and waits for it: {"id": n}
//	GET  /api/agent        device, sources, WAL and upload sections
//	GET  /                 the status page (status.go)
//
// Config validation refuses a non-loopback address without a token. With a
// token, every request except the status page's shell and its static files
// (which carry no data) must carry "Authorization: Bearer TOKEN"; the page
// asks for the token and sends it with its requests. /healthz and /readyz
// answer without it, with nothing but up and ready (probes carry no token).
//
// Against a web page driving the endpoint (cross-site requests, DNS
// rebinding) every request's Host must name this endpoint (guard.go), and a
// POST must come from the same origin. With admin_tls it serves HTTPS, and
// with a client CA requires client certificates.

// Readiness defaults.
const (
	// defaultMaxDisconnected is how long an MQTT source on an outside broker
	// may stay disconnected before the agent reports not ready. Not
	// configurable yet.
	defaultMaxDisconnected = time.Minute
	// sourceSampleEvery is how often the admin samples connection state to
	// time disconnections.
	sourceSampleEvery = time.Second
)

// admin serves the agent's health, metrics, API and status page.
type admin struct {
	a       *Agent
	handler http.Handler
	token   string
	srv     *http.Server
	ln      net.Listener
	log     *slog.Logger

	// now is the wall clock (watermark lag, disconnection times); tests
	// replace it.
	now func() time.Time
	// maxDisconnected: see defaultMaxDisconnected.
	maxDisconnected time.Duration
	// savepointTimeout bounds POST /api/savepoint beyond the client's own
	// deadline: twice the checkpoint timeout, by which the coordinator has
	// aborted it.
	savepointTimeout time.Duration

	mu        sync.Mutex
	downSince map[string]time.Time // tracked source → first sample seen disconnected
	stop      chan struct{}
	stopped   sync.WaitGroup
}

// newAdmin builds the admin handler for a without listening, and registers
// the admin's derived metrics in a's metric set (idempotent).
func newAdmin(a *Agent, token string, log *slog.Logger) *admin {
	ad := &admin{a: a, token: token, log: log, now: time.Now, maxDisconnected: defaultMaxDisconnected,
		savepointTimeout: 2 * a.cfg.Checkpoint.Timeout, downSince: map[string]time.Time{}, stop: make(chan struct{})}
	if ad.savepointTimeout <= 0 {
		ad.savepointTimeout = 2 * time.Minute
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /metrics", ad.metrics)
	api.HandleFunc("GET /api/pipelines", ad.pipelines)
	api.HandleFunc("GET /api/checkpoints", ad.checkpoints)
	api.HandleFunc("POST /api/savepoint", ad.savepoint)
	api.HandleFunc("GET /api/agent", ad.agentInfo)
	var protected http.Handler = api
	if token != "" {
		protected = requireToken(token, api)
	}
	mux := http.NewServeMux()
	mux.Handle("/", protected)
	mux.HandleFunc("GET /healthz", ad.healthz)
	mux.HandleFunc("GET /readyz", ad.readyz)
	mux.HandleFunc("GET /{$}", ad.statusPage)
	mux.Handle("GET /static/", staticAssets())
	hosts := allowedHosts{listen: a.cfg.Agent.Admin, names: a.cfg.Agent.AdminHosts}
	ad.handler = guardRequests(hosts, mux)
	ad.registerMetrics()
	return ad
}

// startAdmin listens on addr and serves the admin endpoint until close.
func startAdmin(a *Agent, addr, token string, log *slog.Logger) (*admin, error) {
	tc, err := adminTLSConfig(a.cfg.Agent.AdminTLS)
	if err != nil {
		return nil, fmt.Errorf("agent: admin_tls: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent: admin listen on %s: %w", addr, err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	ad := newAdmin(a, token, log)
	ad.ln = ln
	ad.srv = &http.Server{Handler: ad.handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := ad.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server stopped", "err", err)
		}
	}()
	ad.stopped.Add(1)
	go ad.sampleSources()
	log.Info("admin endpoint listening", "addr", ln.Addr().String(), "https", tc != nil)
	return ad, nil
}

// Addr is the address the admin server listens on.
func (ad *admin) Addr() string { return ad.ln.Addr().String() }

func (ad *admin) close() {
	close(ad.stop)
	ad.stopped.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = ad.srv.Shutdown(ctx)
}

// sampleSources times disconnections: the connection callback keeps only
// the current state, so the admin notes when it first sees a source down.
func (ad *admin) sampleSources() {
	defer ad.stopped.Done()
	tk := time.NewTicker(sourceSampleEvery)
	defer tk.Stop()
	for {
		ad.observeSources()
		select {
		case <-ad.stop:
			return
		case <-tk.C:
		}
	}
}

// observeSources samples every tracked source's connection state now and
// returns the source reports with DisconnectedMs filled in.
func (ad *admin) observeSources() []sourceReport {
	now := ad.now()
	srcs := ad.a.sourceReports()
	ad.mu.Lock()
	defer ad.mu.Unlock()
	for i := range srcs {
		s := &srcs[i]
		if !s.Tracked {
			continue
		}
		if *s.Connected {
			delete(ad.downSince, s.Name)
			continue
		}
		since, ok := ad.downSince[s.Name]
		if !ok {
			since = now
			ad.downSince[s.Name] = now
		}
		d := now.Sub(since).Milliseconds()
		s.DisconnectedMs = &d
	}
	return srcs
}

// healthCheck is one line of the readiness answer. Warning marks a problem
// that does not make the agent unready (an upload that keeps failing).
type healthCheck struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Warning bool   `json:"warning,omitempty"`
	Detail  string `json:"detail"`
}

// readiness is the body of /readyz.
type readiness struct {
	Ready  bool          `json:"ready"`
	Checks []healthCheck `json:"checks"`
}

// readinessInput is everything readiness is decided on.
type readinessInput struct {
	checkpoints       bool // checkpoints are set up
	consecutiveFails  int
	tolerableFailures int
	sources           []sourceReport // DisconnectedMs filled for tracked sources
	maxDisconnectedMs int64
	ingest            []ingestReport
	wal               []walReport
	upload            *upload.Stats // nil without an upload block
	// diskFull is the "disk" check's detail (diskFullDetail), "" while no
	// place waits for disk space.
	diskFull string
	// restartLimits: regions whose restart strategy gave up (the agent is
	// stopping).
	restartLimits []restartLimit
}

// fullFraction of its max_disk makes an ingest log or WAL count as full:
// the next appends fail (ingest log) or block or drop (WAL).
const fullFraction = 0.95

func isFull(size, max int64) bool { return max > 0 && float64(size) >= fullFraction*float64(max) }

// evaluateReadiness decides readiness. Not ready when:
//   - checkpoints failed in a row at least tolerable_failures times (and at
//     least once): one more failure stops the agent;
//   - an MQTT source on an outside broker has been disconnected for
//     maxDisconnectedMs or longer;
//   - an ingest log or a WAL holds fullFraction of its max_disk or more;
//   - the disk is full ("disk_full": a checkpoint, ingest, state or sink
//     write failed with ENOSPC and space has not come back, or the
//     components together reached max_disk).
//   - a region's restart strategy gave up (the agent is stopping), or
//     the region is down waiting for its next restart.
//
// Uploads that fail (uplink down, wrong credentials, missing bucket) are a
// warning with the last error, not unreadiness: the agent goes on
// processing and checkpointing locally, and a supervisor that
// restarted it would not bring the uplink back.
//
// A WAL whose sink does not report its size yet passes, with a detail
// that says so.
func evaluateReadiness(in readinessInput) readiness {
	r := readiness{Ready: true}
	add := func(name string, ok bool, detail string) {
		r.Checks = append(r.Checks, healthCheck{Name: name, OK: ok, Detail: detail})
		r.Ready = r.Ready && ok
	}
	switch {
	case !in.checkpoints:
		add("checkpoints", true, "not started")
	case in.consecutiveFails > 0 && in.consecutiveFails >= in.tolerableFailures:
		add("checkpoints", false, fmt.Sprintf("%d failed in a row (tolerable_failures = %d): the agent stops after one more",
			in.consecutiveFails, in.tolerableFailures))
	default:
		add("checkpoints", true, fmt.Sprintf("%d failed in a row (tolerable_failures = %d)", in.consecutiveFails, in.tolerableFailures))
	}
	if in.diskFull != "" {
		add("disk", false, in.diskFull)
	}
	for _, l := range in.restartLimits {
		add("restarts/"+l.pipelines, false, l.detail())
	}
	for _, s := range in.sources {
		if !s.Tracked {
			continue
		}
		switch {
		case *s.Connected:
			add("source/"+s.Name, true, "connected")
		case *s.DisconnectedMs >= in.maxDisconnectedMs:
			add("source/"+s.Name, false, fmt.Sprintf("disconnected for %v (limit %v)",
				time.Duration(*s.DisconnectedMs)*time.Millisecond, time.Duration(in.maxDisconnectedMs)*time.Millisecond))
		default:
			add("source/"+s.Name, true, fmt.Sprintf("disconnected for %v (limit %v)",
				time.Duration(*s.DisconnectedMs)*time.Millisecond, time.Duration(in.maxDisconnectedMs)*time.Millisecond))
		}
	}
	for _, l := range in.ingest {
		full := isFull(l.SizeBytes, l.MaxDiskBytes)
		add("ingest/"+l.Source, !full, fmt.Sprintf("%s of %s", formatBytes(l.SizeBytes), formatBytes(l.MaxDiskBytes)))
	}
	if u := in.upload; u != nil {
		detail := fmt.Sprintf("%d checkpoints waiting, recovery point lag %v", u.Pending, u.RecoveryPointLag.Round(time.Second))
		if u.LastError != "" {
			r.Checks = append(r.Checks, healthCheck{Name: "upload", OK: true, Warning: true,
				Detail: "failing, checkpoints stay local: " + u.LastError + "; " + detail})
		} else {
			add("upload", true, detail)
		}
	}
	for _, w := range in.wal {
		if w.Refusal != "" {
			detail := w.Refusal
			if w.BacklogMessages != nil {
				detail += fmt.Sprintf(" (%d results waiting in the WAL)", *w.BacklogMessages)
			}
			add("wal/"+w.Sink, false, detail)
			continue
		}
		if w.DiskBytes == nil {
			add("wal/"+w.Sink, true, "size not reported")
			continue
		}
		full := isFull(*w.DiskBytes, w.MaxDiskBytes)
		detail := fmt.Sprintf("%s of %s", formatBytes(*w.DiskBytes), formatBytes(w.MaxDiskBytes))
		if full {
			detail += " (when_full = " + w.WhenFull + ")"
		}
		add("wal/"+w.Sink, !full, detail)
	}
	return r
}

// readiness evaluates readiness now.
func (ad *admin) readiness() readiness {
	in := readinessInput{sources: ad.observeSources(), maxDisconnectedMs: ad.maxDisconnected.Milliseconds(),
		ingest: ad.a.ingestReports(), wal: ad.a.walReports(), restartLimits: ad.a.restartLimits.list()}
	if ship := ad.a.shipperSeen.Load(); ship != nil {
		st := ship.Stats()
		in.upload = &st
	}
	if rep, ok := ad.a.checkpointReport(); ok {
		in.checkpoints = true
		in.consecutiveFails, in.tolerableFailures = rep.ConsecutiveFailures, rep.TolerableFailures
	}
	in.diskFull = diskFullDetail(ad.a.checkpointDiskFull(), ad.a.diskHolds.details())
	return evaluateReadiness(in)
}

func (ad *admin) healthz(w http.ResponseWriter, r *http.Request) {
	if ready, _ := strconv.ParseBool(r.URL.Query().Get("ready")); ready {
		ad.readyz(w, r)
		return
	}
	if !ad.authorized(r) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "device_id": ad.a.deviceID})
}

// readyz answers without the token (probes carry none), but then only
// whether the agent is ready: the checks name sources and errors.
func (ad *admin) readyz(w http.ResponseWriter, r *http.Request) {
	rd := ad.readiness()
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	if !ad.authorized(r) {
		writeJSON(w, code, map[string]bool{"ready": rd.Ready})
		return
	}
	writeJSON(w, code, rd)
}

// authorized reports whether r carries the admin token, or none is set.
func (ad *admin) authorized(r *http.Request) bool {
	return ad.token == "" || hasToken(r, []byte("Bearer "+ad.token))
}

func (ad *admin) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	ad.a.metrics.WritePrometheus(w)
	// The process's own figures (process_resident_memory_bytes,
	// process_cpu_seconds_total, go_*): on a device nobody logs in to, the
	// agent's footprint is only seen here.
	metrics.WriteProcessMetrics(w)
}

func (ad *admin) pipelines(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ad.a.pipelineReports(ad.now().UnixMilli()))
}

func (ad *admin) checkpoints(w http.ResponseWriter, r *http.Request) {
	rep, ok := ad.a.checkpointReport()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "checkpoints are not started")
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// savepoint takes a savepoint and answers {"id": n} once it is complete.
// Errors: 503 when checkpoints are not running or have failed for good,
// 504 when it does not complete in time, 409 when max_savepoints are kept,
// 500 when it was aborted.
func (ad *admin) savepoint(w http.ResponseWriter, r *http.Request) {
	c := ad.a.ckpt
	if c == nil {
		writeError(w, http.StatusServiceUnavailable, "checkpoints are not started")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ad.savepointTimeout)
	defer cancel()
	id, err := c.Savepoint(ctx)
	switch {
	case err == nil:
		ad.log.Info("savepoint taken on request", "id", id)
		writeJSON(w, http.StatusOK, map[string]uint64{"id": id})
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "savepoint did not complete in time: "+err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "savepoint request cancelled: "+err.Error())
	case errors.Is(err, checkpoint.ErrCoordinatorFailed):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, ErrTooManySavepoints):
		writeError(w, http.StatusConflict, err.Error())
	default:
		ad.log.Warn("savepoint on request failed", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// agentReport is GET /api/agent.
// Empty lists and a null upload mean "not configured".
type agentReport struct {
	DeviceID string         `json:"device_id"`
	Sources  []sourceReport `json:"sources"`
	Ingest   []ingestReport `json:"ingest"`
	WAL      []walReport    `json:"wal"`
	Upload   *uploadReport  `json:"upload"`
	// Disk is null until the agent has sampled its disk use.
	Disk *diskReport `json:"disk"`
}

func (ad *admin) agentReport() agentReport {
	return agentReport{DeviceID: ad.a.deviceID, Sources: ad.observeSources(), Ingest: nonNil(ad.a.ingestReports()),
		WAL: nonNil(ad.a.walReports()), Upload: ad.a.uploadReport(), Disk: ad.a.disk.report()}
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (ad *admin) agentInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ad.agentReport())
}

// registerMetrics adds the metrics the admin derives from the agent's
// state. GetOrCreate keeps it idempotent; the gauges read the agent when
// scraped, so there is no cost between scrapes.
func (ad *admin) registerMetrics() {
	set, a := ad.a.metrics, ad.a
	for _, p := range a.pipelines {
		l := fmt.Sprintf(`{pipeline=%q}`, p.name)
		if p.eventTime {
			set.GetOrCreateGauge("eddy_watermark_lag_ms"+l, func() float64 {
				if wm := p.m.watermark.Load(); wm != -1<<63 {
					return float64(ad.now().UnixMilli() - wm)
				}
				return 0
			})
		}
		hasLate := p.late != nil
		set.GetOrCreateGauge("eddy_readings_dropped_total"+l, func() float64 {
			n := p.m.unassigned.Get()
			if !hasLate {
				n += p.m.late.Get()
			}
			return float64(n)
		})
		set.GetOrCreateGauge(fmt.Sprintf(`eddy_pipeline_parallelism{pipeline=%q}`, p.name), func() float64 {
			return float64(len(p.subtasks))
		})
		if p.shape != nil { // the subtasks keep state: a window, per-key functions
			pm := p.m // kept across region restarts, unlike p
			for name, field := range map[string]func(*stateReport) int64{
				"eddy_state_keys":         func(r *stateReport) int64 { return r.Keys },
				"eddy_state_file_bytes":   func(r *stateReport) int64 { return r.FileBytes },
				"eddy_state_memory_bytes": func(r *stateReport) int64 { return r.MemoryBytes },
				"eddy_state_windows":      func(r *stateReport) int64 { return r.Windows },
				"eddy_state_timers":       func(r *stateReport) int64 { return r.Timers },
			} {
				set.GetOrCreateGauge(name+l, func() float64 {
					if r := pm.stateTotals(); r != nil {
						return float64(field(r))
					}
					return 0
				})
			}
		}
	}
	set.GetOrCreateGauge("eddy_checkpoint_consecutive_failures", func() float64 {
		rep, _ := a.checkpointReport()
		return float64(rep.ConsecutiveFailures)
	})
	set.GetOrCreateGauge("eddy_ready", func() float64 {
		if ad.readiness().Ready {
			return 1
		}
		return 0
	})
	set.GetOrCreateGauge("eddy_clock_synchronized", func() float64 {
		if a.clk.wallSynced() {
			return 1
		}
		return 0
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func hasToken(r *http.Request, want []byte) bool {
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) == 1
}

func requireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasToken(r, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="eddy"`)
			writeError(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <admin_token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}
