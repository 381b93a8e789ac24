package admin

import (
	"embed"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The status page: one HTML page, a script and a style sheet, embedded in
// the binary, with no external assets, so it works on a site network
// without internet access. The page is rendered with the figures of the
// moment (readable without JavaScript); its script then polls the API every
// 1.5 s and updates them, computing readings/s from successive polls.
//
// With an admin token the page is served without figures (it is public, the
// API is not); the script asks for the token and sends it as a Bearer
// header, keeping it in the tab's sessionStorage.

//go:embed status/status.js status/status.css
var statusFS embed.FS

// statusHistoryRows is how many checkpoints the page's table shows.
const statusHistoryRows = 10

// The page is written by renderStatus rather than html/template: templates
// call methods by reflection, which keeps the linker from dropping unused
// methods and costs the binary about 2 MiB — more than the whole page is
// worth on a device with a size budget. Every value goes through esc.

func esc(s string) string { return html.EscapeString(s) }

func lagText(p PipelineReport) string {
	switch {
	case !p.EventTime:
		return "processing time"
	case p.WatermarkLagMs == nil:
		return "no watermark yet"
	}
	return formatMs(*p.WatermarkLagMs)
}

// stateText sums up a pipeline's state: its open windows and the bytes of
// its store (the bbolt files, or memory for the memory backend).
func stateText(p PipelineReport) string {
	st := p.State
	if st == nil {
		return "none"
	}
	b := st.FileBytes
	if b == 0 {
		b = st.MemoryBytes
	}
	return strconv.FormatInt(st.Windows, 10) + " windows, " + FormatBytes(b)
}

func connText(s SourceReport) string {
	switch {
	case !s.Tracked:
		return "not tracked"
	case s.Connected != nil && *s.Connected:
		return "connected"
	case s.DisconnectedMs != nil:
		return "disconnected for " + formatMs(*s.DisconnectedMs)
	}
	return "disconnected"
}

// seconds trims an RFC 3339 time to whole seconds.
func seconds(s string) string {
	if i := strings.LastIndexByte(s, '.'); i > 0 && strings.HasSuffix(s, "Z") {
		return s[:i] + "Z"
	}
	return s
}

const notYet = "not reported yet"

func optBytes(v *int64) string {
	if v == nil {
		return notYet
	}
	return FormatBytes(*v)
}

func optMs(v *int64) string {
	if v == nil {
		return notYet
	}
	return formatMs(*v)
}

func optInt(v *int64, unit string) string {
	if v == nil {
		return notYet
	}
	return strings.TrimSpace(strconv.FormatInt(*v, 10) + " " + unit)
}

func optSeconds(v *float64) string {
	if v == nil {
		return notYet
	}
	return formatMs(int64(*v * 1000))
}

func optConn(v *bool) string {
	switch {
	case v == nil:
		return notYet
	case *v:
		return "connected"
	}
	return "disconnected"
}

// renderStatus writes the status page for d.
func renderStatus(b *strings.Builder, d statusPageData) {
	pg := &statusPage{b: b, d: d, none: "–"}
	if d.Data {
		pg.none = "Not configured."
	}
	pg.header()
	pg.w("<main>\n")
	pg.pipelines()
	pg.checkpoints()
	pg.sources()
	pg.ingest()
	pg.wal()
	pg.upload()
	pg.disk()
	pg.w(`</main>
<script src="static/status.js"></script>
</body>
</html>
`)
}

// statusPage writes the status page's HTML, one section per method, in the
// order the page's script expects the ids.
type statusPage struct {
	b    *strings.Builder
	d    statusPageData
	none string // what a section without figures says
}

func (pg *statusPage) w(parts ...string) {
	for _, p := range parts {
		pg.b.WriteString(p)
	}
}

// decimal writes n in base 10.
func decimal(n uint64) string { return strconv.FormatUint(n, 10) }

// header writes the document's head, the health line and the token form.
func (pg *statusPage) header() {
	d := pg.d
	dev := esc(d.DeviceID)
	pg.w(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Eddy `, dev, `</title>
<link rel="stylesheet" href="static/status.css">
</head>
<body data-polls="0">
<header>
<h1>Eddy <span id="device">`, dev, `</span></h1>
`)
	ready, health := "", "Health unknown."
	if r := d.Ready; r != nil {
		ready = strconv.FormatBool(r.Ready)
		if r.Ready {
			health = "Ready"
		} else {
			health = "Not ready:"
			for _, c := range r.Checks {
				if !c.OK {
					health += " " + esc(c.Name) + ": " + esc(c.Detail) + "."
				}
			}
		}
	}
	pg.w(`<p id="health" role="status" data-ready="`, ready, `">`, health, `</p>
<p class="meta">Updated <time id="updated">`, esc(d.Updated), `</time>. <span id="poll-error" role="alert"></span></p>
<noscript><p>JavaScript is off: the figures are as of page load; reload to refresh them.</p></noscript>
</header>
<form id="auth" hidden>
<label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required>
<button type="submit">Use token</button>
</form>
`)
}

func (pg *statusPage) pipelines() {
	pg.w(`<section aria-labelledby="h-pipelines">
<h2 id="h-pipelines">Pipelines</h2>
<table id="pipelines">
<caption>Rates are computed from successive polls; watermark lag is the device clock minus the watermark; state is as of the last checkpoint.</caption>
<thead><tr><th scope="col">Pipeline</th><th scope="col">Readings in</th><th scope="col">Readings/s</th><th scope="col">Results out</th><th scope="col">Results/s</th><th scope="col">Watermark lag</th><th scope="col">Late</th><th scope="col">Dropped</th><th scope="col">Dead-lettered</th><th scope="col">Filtered</th><th scope="col">State</th><th scope="col">Subtasks</th></tr></thead>
<tbody>`)
	for _, p := range pg.d.Pipelines {
		n := esc(p.Name)
		pg.w("\n", `<tr data-pipeline="`, n, `"><th scope="row">`, n, `</th><td data-field="readings_in">`, decimal(p.ReadingsIn),
			`</td><td data-field="readings_per_s">–</td><td data-field="results_out">`, decimal(p.ResultsOut),
			`</td><td data-field="results_per_s">–</td><td data-field="watermark_lag">`, esc(lagText(p)),
			`</td><td data-field="late">`, decimal(p.Late), `</td><td data-field="dropped">`, decimal(p.Dropped),
			`</td><td data-field="dead_lettered">`, decimal(p.DeadLettered), `</td><td data-field="filtered">`, decimal(p.Filtered),
			`</td><td data-field="state">`, esc(stateText(p)),
			`</td><td data-field="parallelism">`, strconv.Itoa(p.Parallelism), `</td></tr>`)
	}
	pg.w(`
</tbody>
</table>
</section>
`)
}

func (pg *statusPage) checkpoints() {
	pg.w(`<section aria-labelledby="h-checkpoints">
<h2 id="h-checkpoints">Checkpoints</h2>
<dl id="ckpt-stats" class="stats">`)
	if c := pg.d.Checkpoints; c != nil {
		pg.w(`
<div><dt>Completed</dt><dd data-field="completed">`, decimal(c.Completed), `</dd></div>
<div><dt>Failed</dt><dd data-field="failed">`, decimal(c.Failed), `</dd></div>
<div><dt>Failed in a row</dt><dd data-field="consecutive_failures">`, strconv.Itoa(c.ConsecutiveFailures), ` of `, strconv.Itoa(c.TolerableFailures), ` tolerated</dd></div>
<div><dt>Last duration</dt><dd data-field="last_duration">`, formatMs(c.LastDurationMs), `</dd></div>
<div><dt>Last size</dt><dd data-field="last_size">`, FormatBytes(c.LastSizeBytes), `</dd></div>
<div><dt>Chain size</dt><dd data-field="last_full_size">`, FormatBytes(c.LastFullBytes), `</dd></div>`)
	}
	pg.w(`
</dl>
<figure>
<svg id="ckpt-chart" role="img" aria-labelledby="ckpt-chart-title" viewBox="0 0 300 80" preserveAspectRatio="none"><title id="ckpt-chart-title">Size and duration of recent checkpoints</title></svg>
<figcaption>The last 30 checkpoints, oldest left: size (bars; red: aborted) and duration (line).</figcaption>
</figure>
<form id="savepoint" method="post" action="api/savepoint">
<button type="submit">Take a savepoint</button> <output id="savepoint-result" for="savepoint"></output>
</form>
<table id="checkpoints">
<caption>Most recent first.</caption>
<thead><tr><th scope="col">ID</th><th scope="col">Kind</th><th scope="col">Time</th><th scope="col">Duration</th><th scope="col">Size</th><th scope="col">Chain size</th><th scope="col">Alignment</th><th scope="col">Result</th></tr></thead>
<tbody>`)
	for _, h := range pg.d.History {
		result := "completed"
		if h.Aborted != "" {
			result = "aborted: " + esc(h.Aborted)
		}
		pg.w("\n<tr><td>", decimal(h.ID), "</td><td>", esc(h.Kind), "</td><td>", esc(seconds(h.Time)), "</td><td>", formatMs(h.DurationMs),
			"</td><td>", FormatBytes(h.SizeBytes), "</td><td>", FormatBytes(h.FullBytes), "</td><td>", formatMs(h.AlignmentMs),
			"</td><td>", result, "</td></tr>")
	}
	pg.w(`
</tbody>
</table>
</section>
`)
}

func (pg *statusPage) sources() {
	pg.w(`<section aria-labelledby="h-sources">
<h2 id="h-sources">Sources</h2>
<table id="sources">
<thead><tr><th scope="col">Source</th><th scope="col">Kind</th><th scope="col">Connection</th></tr></thead>
<tbody>`)
	for _, src := range pg.d.Agent.Sources {
		pg.w("\n", `<tr><th scope="row">`, esc(src.Name), "</th><td>", esc(src.Kind), "</td><td>", esc(connText(src)), "</td></tr>")
	}
	pg.w(`
</tbody>
</table>
</section>
`)
}

func (pg *statusPage) ingest() {
	pg.w(`<section aria-labelledby="h-ingest">
<h2 id="h-ingest">Ingest logs</h2>
<div id="ingest">`)
	if in := pg.d.Agent.Ingest; len(in) > 0 {
		pg.w(`<table>
<thead><tr><th scope="col">Source</th><th scope="col">Size</th><th scope="col">Limit</th><th scope="col">Offsets</th><th scope="col">Lag</th></tr></thead>
<tbody>`)
		for _, in := range in {
			pg.w(`<tr><th scope="row">`, esc(in.Source), "</th><td>", FormatBytes(in.SizeBytes), "</td><td>", FormatBytes(in.MaxDiskBytes),
				"</td><td>", decimal(in.FirstOffset), "–", decimal(in.LastOffset), "</td><td>", decimal(in.LagRecords), "</td></tr>")
		}
		pg.w(`</tbody>
</table>`)
	} else {
		pg.w("<p>", pg.none, "</p>")
	}
	pg.w(`</div>
</section>
`)
}

func (pg *statusPage) wal() {
	pg.w(`<section aria-labelledby="h-wal">
<h2 id="h-wal">WAL backlog</h2>
<div id="wal">`)
	if wals := pg.d.Agent.WAL; len(wals) > 0 {
		pg.w(`<table>
<thead><tr><th scope="col">Sink</th><th scope="col">Backlog</th><th scope="col">Messages</th><th scope="col">Oldest</th><th scope="col">On disk</th><th scope="col">Limit</th><th scope="col">Uplink</th></tr></thead>
<tbody>`)
		for _, wl := range wals {
			pg.w(`<tr><th scope="row">`, esc(wl.Sink), "</th><td>", optBytes(wl.BacklogBytes), "</td><td>", optInt(wl.BacklogMessages, ""),
				"</td><td>", optSeconds(wl.OldestAgeS), "</td><td>", optBytes(wl.DiskBytes), "</td><td>", FormatBytes(wl.MaxDiskBytes),
				"</td><td>", optConn(wl.Connected), "</td></tr>")
		}
		pg.w(`</tbody>
</table>`)
	} else {
		pg.w("<p>", pg.none, "</p>")
	}
	pg.w(`</div>
</section>
`)
}

func (pg *statusPage) upload() {
	pg.w(`<section aria-labelledby="h-upload">
<h2 id="h-upload">Upload backlog</h2>
<p id="upload">`)
	if up := pg.d.Agent.Upload; up != nil {
		pg.w("To ", esc(up.Endpoint), "/", esc(up.Bucket), "/", esc(up.Prefix), "; backlog ", optInt(up.BacklogCheckpoints, "checkpoints"),
			" (", optInt(up.BacklogFiles, "files"), "), recovery-point lag ", optMs(up.RecoveryPointLagMs), ".")
	} else {
		pg.w(pg.none)
	}
	pg.w(`</p>
</section>
`)
}

func (pg *statusPage) disk() {
	dk := pg.d.Agent.Disk
	pg.w(`<section aria-labelledby="h-disk">
<h2 id="h-disk">Disk</h2>
<p id="disk-budget">`, diskBudgetText(dk, pg.none), `</p>
<div id="disk">`)
	if dk != nil {
		pg.w(`<table>
<thead><tr><th scope="col">Component</th><th scope="col">On disk</th></tr></thead>
<tbody>`)
		for _, c := range dk.Components {
			pg.w(`<tr><th scope="row">`, esc(c.Component), "</th><td>", FormatBytes(c.Bytes), "</td></tr>")
		}
		pg.w(`</tbody>
</table>`)
	} else {
		pg.w("<p>", pg.none, "</p>")
	}
	pg.w(`</div>
</section>
`)
}

// diskBudgetText sums up the disk budget and use as the page's script does.
// Without figures (a token is configured) it is none.
func diskBudgetText(dk *DiskReport, none string) string {
	if dk == nil {
		return none
	}
	budget := "unknown (set agent { max_disk })"
	if dk.BudgetBytes > 0 {
		budget = FormatBytes(dk.BudgetBytes)
	}
	var used int64
	for _, c := range dk.Components {
		used += c.Bytes
	}
	return "Using " + FormatBytes(used) + " of a budget of " + budget + "; " + FormatBytes(dk.FreeBytes) + " free on data_dir's file system."
}

// statusPageData is what index.html is rendered with. Data is false when the
// figures are left out (a token is configured).
type statusPageData struct {
	DeviceID    string
	Data        bool
	Updated     string
	Ready       *Readiness
	Pipelines   []PipelineReport
	Checkpoints *CheckpointReport
	History     []CheckpointRecord // newest first, at most statusHistoryRows
	Agent       AgentReport
}

func (s *Server) statusData() statusPageData {
	d := statusPageData{DeviceID: s.a.DeviceID()}
	if s.opts.Token != "" {
		return d
	}
	d.Data, d.Updated = true, s.opts.Now().UTC().Format(time.RFC3339)
	rd := s.a.Readiness()
	d.Ready = &rd
	d.Pipelines = s.a.Pipelines()
	if rep, ok := s.a.Checkpoints(); ok {
		d.Checkpoints = &rep
		for i := len(rep.History) - 1; i >= 0 && len(d.History) < statusHistoryRows; i-- {
			d.History = append(d.History, rep.History[i])
		}
	}
	d.Agent = s.a.Report()
	return d
}

func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	var buf strings.Builder
	renderStatus(&buf, s.statusData())
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Everything the page needs is its own: forbid anything else.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	_, _ = io.WriteString(w, buf.String())
}

// staticAssets serves status/*.js and *.css under /static/.
func staticAssets() http.Handler {
	sub, err := fs.Sub(statusFS, "status")
	if err != nil {
		panic(fmt.Sprintf("admin: embedded status assets: %v", err))
	}
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".js") && !strings.HasSuffix(r.URL.Path, ".css") {
			http.NotFound(w, r)
			return
		}
		// Revalidate: a new binary may bring a new script.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// FormatBytes writes n in B, KiB, MiB or GiB with one decimal, as the
// page's script does (and the readiness checks' details).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + [...]string{"KiB", "MiB", "GiB"}[i]
}

// formatMs writes a duration in ms as "850 ms", "12.5 s" or "3.2 min", as
// the page's script does.
func formatMs(ms int64) string {
	switch {
	case ms < 1000 && ms > -1000:
		return strconv.FormatInt(ms, 10) + " ms"
	case ms < 120_000 && ms > -120_000:
		return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
	}
	return strconv.FormatFloat(float64(ms)/60_000, 'f', 1, 64) + " min"
}
