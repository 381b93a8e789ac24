// Package admin is Eddy's admin endpoint: health and readiness probes,
// Prometheus metrics, a JSON API, a savepoint trigger, Go's profiles and a
// status page, served over HTTP(S) for one running agent. It knows the agent
// only through the Agent interface, which the agent implements; everything
// it serves comes from there, and it changes nothing but by Savepoint.
//
// Routes (README "Admin endpoint and status page"):
//
//	GET  /healthz          liveness: 200 while the process serves HTTP
//	GET  /readyz           readiness: 200, or 503 with the failing checks
//	GET  /healthz?ready=1  the same as /readyz
//	GET  /metrics          Prometheus text format
//	GET  /api/pipelines    per-pipeline counters, watermark and its lag
//	GET  /api/checkpoints  checkpoint statistics and recent history
//	POST /api/savepoint    takes a savepoint and waits for it: {"id": n}
//	GET  /api/agent        device, sources, WAL, upload and disk sections
//	GET  /debug/pprof/{name}  Go's runtime profiles: heap, goroutine… (pprof.go)
//	GET  /debug/pprof/profile?seconds=N  a CPU profile of N seconds, 1..60
//	GET  /                 the status page (status.go)
//
// Access. The agent's configuration refuses a non-loopback listen address
// without a token. With a token, every request except the status page's
// shell and its static files (which carry no data) must carry
// "Authorization: Bearer TOKEN"; the page asks for the token and sends it
// with its requests. /healthz and /readyz answer without it, with nothing
// but up and ready (probes carry no token). /debug/pprof/ takes the token
// like the API and, without a token configured, answers only requests from
// loopback.
//
// Against a web page driving the endpoint (cross-site requests, DNS
// rebinding) every request's Host must name this endpoint, and a POST must
// come from the same origin (guard.go). With Options.TLS it serves HTTPS;
// a client CA in that config makes it require client certificates.
package admin
