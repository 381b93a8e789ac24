package e2e

// The status page in a real headless browser (Debian's chromium) against
// the real binary: the figures appear, update from poll to poll, and the
// savepoint button works. Chromium is driven over the DevTools protocol on
// --remote-debugging-pipe (NUL-terminated JSON on fds 3 and 4), so the test
// needs no port and no WebSocket client.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// statusSnapshot is what the page shows, read from its DOM.
type statusSnapshot struct {
	Polls     int                          `json:"polls"`
	Ready     string                       `json:"ready"`
	Pipelines map[string]map[string]string `json:"pipelines"`
	Stats     map[string]string            `json:"stats"`
	Bars      int                          `json:"bars"`
	History   int                          `json:"history"`
	Ingest    string                       `json:"ingest"`
	WAL       string                       `json:"wal"`
	Upload    string                       `json:"upload"`
	Disk      string                       `json:"disk"`
	Sources   string                       `json:"sources"`
	Savepoint string                       `json:"savepoint"`
	Error     string                       `json:"error"`
}

const snapshotJS = `JSON.stringify({
  polls: +document.body.dataset.polls,
  ready: document.getElementById("health").dataset.ready,
  pipelines: Object.fromEntries([...document.querySelectorAll("#pipelines tbody tr")].map(tr =>
    [tr.dataset.pipeline, Object.fromEntries([...tr.querySelectorAll("[data-field]")].map(td => [td.dataset.field, td.textContent]))])),
  stats: Object.fromEntries([...document.querySelectorAll("#ckpt-stats [data-field]")].map(d => [d.dataset.field, d.textContent])),
  bars: document.querySelectorAll("#ckpt-chart rect").length,
  history: document.querySelectorAll("#checkpoints tbody tr").length,
  ingest: document.getElementById("ingest").textContent,
  wal: document.getElementById("wal").textContent,
  upload: document.getElementById("upload").textContent,
  disk: document.getElementById("disk-budget").textContent + " | " + document.getElementById("disk").textContent,
  sources: document.getElementById("sources").textContent,
  savepoint: document.getElementById("savepoint-result").textContent,
  error: document.getElementById("poll-error").textContent,
})`

func TestStatusPage_Browser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		// Not a skip: CI must run this; scripts/install-deps.sh installs it.
		t.Fatalf("chromium not found (%v): run scripts/install-deps.sh", err)
	}
	dir := t.TempDir()
	ag := startAgent(t, dir, replaceAll(`
agent {
  device_id = "browser"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices   = 5
  rate      = 200
  late      = 0.05
  malformed = 0.02
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "temps" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" { size = "1s" }
  aggregate {
    n   = count()
    avg = avg(event.temp)
  }
  to = [sink.file.out]
}
checkpoint { interval = "1s" }
`, "%BROKER%", loopback.Addr(t)))

	b := startChromium(t, chromium, t.TempDir())
	var target struct{ TargetID string }
	b.call(t, "", "Target.createTarget", map[string]any{"url": "http://" + ag.admin + "/"}, &target)
	var att struct{ SessionID string }
	b.call(t, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	snap := func() statusSnapshot {
		var r struct {
			Result struct{ Value string }
		}
		b.call(t, att.SessionID, "Runtime.evaluate", map[string]any{"expression": snapshotJS, "returnByValue": true}, &r)
		var s statusSnapshot
		if r.Result.Value != "" {
			if err := json.Unmarshal([]byte(r.Result.Value), &s); err != nil {
				t.Fatalf("snapshot %q: %v", r.Result.Value, err)
			}
		}
		return s
	}
	var first statusSnapshot
	await.True(t, 30*time.Second, `first.Polls >= 2 && count(p["readings_in"]) > 0 && rateOf(p["readings_per_s"]) > 0 && count(p["dead_lettered"]) > 0 && first.Bars > 0 && p["state"] != "" && !strings.HasPrefix(p["state"], "0 ")`, func() bool {
		first = snap()
		p := first.Pipelines["temps"]
		return first.Polls >= 2 && count(p["readings_in"]) > 0 && rateOf(p["readings_per_s"]) > 0 &&
			count(p["dead_lettered"]) > 0 && first.Bars > 0 && p["state"] != "" && !strings.HasPrefix(p["state"], "0 ")
	})
	t.Logf("first: %+v", first)
	p := first.Pipelines["temps"]
	if first.Ready != "true" || first.Error != "" {
		t.Errorf("health %q, poll error %q", first.Ready, first.Error)
	}
	if lag := p["watermark_lag"]; !regexp.MustCompile(`^-?\d+(\.\d)? (ms|s|min)$`).MatchString(lag) {
		t.Errorf("watermark lag %q", lag)
	}
	for _, f := range []string{"late", "dropped", "filtered", "results_out"} {
		if _, err := strconv.ParseUint(p[f], 10, 64); err != nil {
			t.Errorf("%s = %q, not a count", f, p[f])
		}
	}
	if st := p["state"]; !regexp.MustCompile(`^[1-9]\d* windows, \d+(\.\d)? (B|KiB|MiB)$`).MatchString(st) {
		t.Errorf("state %q: want the open windows and the store's size", st)
	}
	if p["parallelism"] != "1" {
		t.Errorf("parallelism %q", p["parallelism"])
	}
	if first.WAL != "Not configured." || !strings.HasPrefix(first.Upload, "Not configured.") {
		t.Errorf("WAL %q, upload %q: want not configured", first.WAL, first.Upload)
	}
	if !strings.Contains(first.Ingest, "sim") || !strings.Contains(first.Sources, "simulator") {
		t.Errorf("ingest %q, sources %q", first.Ingest, first.Sources)
	}
	// The budget is derived from the temporary directory's file system.
	if !regexp.MustCompile(`^Using \d+(\.\d)? (B|KiB|MiB) of a budget of \d+\.\d (KiB|MiB|GiB); \d+\.\d (KiB|MiB|GiB) free on data_dir's file system\. \| .*ingest.*checkpoints.*state.*sink`).MatchString(first.Disk) {
		t.Errorf("disk %q: want the budget, the free space and the components", first.Disk)
	}
	if first.History == 0 || count(first.Stats["completed"]) == 0 {
		t.Errorf("checkpoints: %d rows, stats %v", first.History, first.Stats)
	}

	// The same page, a few polls later: the figures moved.
	var second statusSnapshot
	await.True(t, 30*time.Second, `second.Polls >= first.Polls+2 && count(second.Stats["completed"]) > count(first.Stats["completed"])`, func() bool {
		second = snap()
		return second.Polls >= first.Polls+2 && count(second.Stats["completed"]) > count(first.Stats["completed"])
	})
	t.Logf("second: %+v", second)
	if a, b := count(first.Pipelines["temps"]["readings_in"]), count(second.Pipelines["temps"]["readings_in"]); b <= a {
		t.Errorf("readings in did not grow: %d then %d", a, b)
	}
	if second.Bars < first.Bars {
		t.Errorf("chart bars %d then %d", first.Bars, second.Bars)
	}

	// The savepoint button posts to the API and shows the id.
	var ignored json.RawMessage
	b.call(t, att.SessionID, "Runtime.evaluate", map[string]any{"expression": `document.querySelector("#savepoint button").click()`}, &ignored)
	await.True(t, 30*time.Second, `strings.HasPrefix(snap().Savepoint, "Savepoint ")`, func() bool { return strings.HasPrefix(snap().Savepoint, "Savepoint ") })
	if s := snap().Savepoint; !regexp.MustCompile(`^Savepoint \d+ taken\.$`).MatchString(s) {
		t.Errorf("savepoint result %q", s)
	}
}

// count parses a counter cell; -1 when it is not one.
func count(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// rateOf parses "12.5/s"; -1 when it is not a rate.
func rateOf(s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	if err != nil || !strings.HasSuffix(s, "/s") {
		return -1
	}
	return v
}

// browser is a headless chromium driven over --remote-debugging-pipe.
type browser struct {
	toChrome   *os.File      // chromium reads commands from its fd 3
	fromChrome *os.File      // and writes replies and events on its fd 4
	r          *bufio.Reader // over fromChrome
	next       int
	stderr     *bytes.Buffer
}

func startChromium(t *testing.T, path, profile string) *browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{toChrome: cmdW, fromChrome: outR, r: bufio.NewReader(outR), stderr: new(bytes.Buffer)}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
		"--disable-dev-shm-usage", "--remote-debugging-pipe", "--user-data-dir="+profile, "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	cmd.Stdout, cmd.Stderr = b.stderr, b.stderr
	// Its own process group, so the renderer and helpers go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	cmdR.Close()
	outW.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// Ask politely, then make sure.
		_ = b.send("", "Browser.close", nil)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		cmdW.Close()
		outR.Close()
		if t.Failed() {
			t.Logf("chromium output:\n%s", b.stderr.String())
		}
	})
	return b
}

func (b *browser) send(session, method string, params any) error {
	b.next++
	msg := map[string]any{"id": b.next, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	buf, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_ = b.toChrome.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err = b.toChrome.Write(append(buf, 0))
	return err
}

// call sends a DevTools command and decodes its result into out, skipping
// the events in between.
func (b *browser) call(t *testing.T, session, method string, params, out any) {
	t.Helper()
	if err := b.send(session, method, params); err != nil {
		t.Fatalf("devtools %s: %v", method, err)
	}
	id := b.next
	_ = b.fromChrome.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		line, err := b.r.ReadBytes(0)
		if err != nil {
			t.Fatalf("devtools %s: read: %v", method, err)
		}
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line[:len(line)-1], &m); err != nil {
			t.Fatalf("devtools %s: %v in %q", method, err, line)
		}
		if m.ID != id {
			continue // an event, or a reply to an earlier send
		}
		if m.Error != nil {
			t.Fatalf("devtools %s: error %d: %s", method, m.Error.Code, m.Error.Message)
		}
		if err := json.Unmarshal(m.Result, out); err != nil {
			t.Fatalf("devtools %s: result %s: %v", method, m.Result, err)
		}
		return
	}
}
