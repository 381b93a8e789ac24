package agent

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
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

//go:embed status/index.html status/status.js status/status.css
var statusFS embed.FS

// statusHistoryRows is how many checkpoints the page's table shows.
const statusHistoryRows = 10

var statusTemplate = template.Must(template.New("index.html").Funcs(template.FuncMap{
	"bytes": formatBytes,
	"ms":    formatMs,
	"lag": func(p pipelineReport) string {
		switch {
		case !p.EventTime:
			return "processing time"
		case p.WatermarkLagMs == nil:
			return "no watermark yet"
		}
		return formatMs(*p.WatermarkLagMs)
	},
	"conn": func(s sourceReport) string {
		switch {
		case !s.Tracked:
			return "not tracked"
		case *s.Connected:
			return "connected"
		case s.DisconnectedMs != nil:
			return "disconnected for " + formatMs(*s.DisconnectedMs)
		}
		return "disconnected"
	},
	// seconds trims an RFC 3339 time to whole seconds.
	"seconds": func(s string) string {
		if i := strings.LastIndexByte(s, '.'); i > 0 && strings.HasSuffix(s, "Z") {
			return s[:i] + "Z"
		}
		return s
	},
	"optBytes": func(v *int64) string {
		if v == nil {
			return "not reported yet"
		}
		return formatBytes(*v)
	},
	"optMs": func(v *int64) string {
		if v == nil {
			return "not reported yet"
		}
		return formatMs(*v)
	},
	"optInt": func(v *int64, unit string) string {
		if v == nil {
			return "not reported yet"
		}
		return strings.TrimSpace(strconv.FormatInt(*v, 10) + " " + unit)
	},
	"optSeconds": func(v *float64) string {
		if v == nil {
			return "not reported yet"
		}
		return formatMs(int64(*v * 1000))
	},
	"optConn": func(v *bool) string {
		switch {
		case v == nil:
			return "not reported yet"
		case *v:
			return "connected"
		}
		return "disconnected"
	},
}).ParseFS(statusFS, "status/index.html"))

// statusPageData is what index.html is rendered with. Data is false when the
// figures are left out (a token is configured).
type statusPageData struct {
	DeviceID    string
	Data        bool
	Updated     string
	Ready       *readiness
	Pipelines   []pipelineReport
	Checkpoints *checkpointReport
	History     []checkpointRecord // newest first, at most statusHistoryRows
	Agent       agentReport
}

func (ad *admin) statusData() statusPageData {
	d := statusPageData{DeviceID: ad.a.deviceID}
	if ad.token != "" {
		return d
	}
	now := ad.now()
	d.Data, d.Updated = true, now.UTC().Format(time.RFC3339)
	rd := ad.readiness()
	d.Ready = &rd
	d.Pipelines = ad.a.pipelineReports(now.UnixMilli())
	if rep, ok := ad.a.checkpointReport(); ok {
		d.Checkpoints = &rep
		for i := len(rep.History) - 1; i >= 0 && len(d.History) < statusHistoryRows; i-- {
			d.History = append(d.History, rep.History[i])
		}
	}
	d.Agent = ad.agentReport()
	return d
}

func (ad *admin) statusPage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, ad.statusData()); err != nil {
		ad.log.Error("rendering the status page failed", "err", err)
		http.Error(w, "agent: status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Everything the page needs is its own: forbid anything else.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	_, _ = w.Write(buf.Bytes())
}

// staticAssets serves status/*.js and *.css under /static/.
func staticAssets() http.Handler {
	sub, err := fs.Sub(statusFS, "status")
	if err != nil {
		panic(fmt.Sprintf("agent: embedded status assets: %v", err))
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

// formatBytes writes n in B, KiB, MiB or GiB with one decimal, as the
// page's script does.
func formatBytes(n int64) string {
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
