package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// buildEddy builds the binary from the repository in the working directory
// (the scripts cd to the root) into dir and returns its path. It is built
// as scripts/build.sh builds a release (static, no cgo, trimmed, stripped),
// so CPU and memory figures are those of the binary a device runs: a cgo
// build maps libc and the dynamic loader (~1.5 MiB more RSS) and resolves
// names through libc.
func buildEddy(dir string) (string, error) {
	if _, err := os.Stat("go.mod"); err != nil {
		return "", fmt.Errorf("run from the repository root: %w", err)
	}
	bin := filepath.Join(dir, "eddy")
	progress("building eddy")
	out, err := func() ([]byte, error) {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.CombinedOutput()
	}()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// agentProc is a running eddy binary with JSON logs in dir/agent.log.
type agentProc struct {
	cmd     *exec.Cmd
	admin   string
	logPath string
	started time.Time
	done    chan error
}

// startAgent writes cfg to dir/agent.hcl, with %ADMIN% and %DATA%
// replaced, starts bin and waits until the admin endpoint answers.
func startAgent(bin, dir, cfg string) (*agentProc, error) {
	port, err := loopback.Port()
	if err != nil {
		return nil, err
	}
	admin := fmt.Sprintf("127.0.0.1:%d", port)
	cfg = strings.NewReplacer("%ADMIN%", admin, "%DATA%", filepath.Join(dir, "data")).Replace(cfg)
	path := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "agent.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &agentProc{admin: admin, logPath: logPath, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "run", "-c", path)
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait(); lf.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + admin + "/healthz"); err == nil {
			resp.Body.Close()
			return p, nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			return nil, fmt.Errorf("eddy exited at start (%v): %s", err, p.tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.kill()
	return nil, fmt.Errorf("eddy did not answer on %s: %s", admin, p.tail())
}

func (p *agentProc) pid() int { return p.cmd.Process.Pid }

// tail returns the end of the agent's log, for error messages.
func (p *agentProc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stop sends SIGTERM (final checkpoint, flush) and waits for the exit.
func (p *agentProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			return fmt.Errorf("eddy exited with %w after SIGTERM: %s", err, p.tail())
		}
		return nil
	case <-time.After(120 * time.Second):
		p.kill()
		return fmt.Errorf("eddy did not exit within 120 s of SIGTERM")
	}
}

func (p *agentProc) kill() {
	_ = p.cmd.Process.Kill()
	err := <-p.done
	p.done <- err
}

// pipelineReport is the part of GET /api/pipelines the benchmarks read.
type pipelineReport struct {
	Name         string `json:"name"`
	ReadingsIn   uint64 `json:"readings_in"`
	ResultsOut   uint64 `json:"results_out"`
	Late         uint64 `json:"late"`
	DeadLettered uint64 `json:"dead_lettered"`
	Dropped      uint64 `json:"dropped"`
}

type checkpointRecord struct {
	ID         uint64 `json:"id"`
	Kind       string `json:"kind"`
	SizeBytes  int64  `json:"size_bytes"`
	FullBytes  int64  `json:"full_bytes"`
	DurationMs int64  `json:"duration_ms"`
	Aborted    string `json:"aborted"`
}

type checkpointReport struct {
	Completed       uint64             `json:"completed"`
	Failed          uint64             `json:"failed"`
	LastCompletedID uint64             `json:"last_completed_id"`
	History         []checkpointRecord `json:"history"`
}

func (p *agentProc) getJSON(path string, v any) error {
	resp, err := http.Get("http://" + p.admin + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (p *agentProc) pipeline(name string) (pipelineReport, error) {
	var all []pipelineReport
	if err := p.getJSON("/api/pipelines", &all); err != nil {
		return pipelineReport{}, err
	}
	for _, r := range all {
		if r.Name == name {
			return r, nil
		}
	}
	return pipelineReport{}, fmt.Errorf("no pipeline %q", name)
}

func (p *agentProc) checkpoints() (checkpointReport, error) {
	var r checkpointReport
	err := p.getJSON("/api/checkpoints", &r)
	return r, err
}

// savepoint takes a savepoint (a full checkpoint) and returns its id.
func (p *agentProc) savepoint() (uint64, error) {
	c := http.Client{Timeout: 5 * time.Minute}
	resp, err := c.Post("http://"+p.admin+"/api/savepoint", "", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		ID    uint64 `json:"id"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("savepoint: %s %v %s", resp.Status, err, r.Error)
	}
	return r.ID, nil
}

// waitReadings waits until pipeline has taken in at least n readings.
func (p *agentProc) waitReadings(pipeline string, n uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last pipelineReport
	for time.Now().Before(deadline) {
		r, err := p.pipeline(pipeline)
		if err == nil {
			last = r
			if r.ReadingsIn >= n {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("pipeline %s took in %d of %d readings in %v", pipeline, last.ReadingsIn, n, timeout)
}

// logLine finds the first JSON log line whose msg is msg and returns its
// time and fields; ok is false if there is none yet.
func (p *agentProc) logLine(msg string) (at time.Time, fields map[string]any, ok bool) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return at, nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	want := []byte(`"msg":"` + msg + `"`)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), want) {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &fields); err != nil {
			continue
		}
		s, _ := fields["time"].(string)
		at, _ = time.Parse(time.RFC3339Nano, s)
		return at, fields, true
	}
	return at, nil, false
}

// logLines returns the fields of every JSON log line whose msg is msg.
func (p *agentProc) logLines(msg string) []map[string]any {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil
	}
	want := []byte(`"msg":"` + msg + `"`)
	var out []map[string]any
	for _, line := range bytes.Split(b, []byte("\n")) {
		var fields map[string]any
		if bytes.Contains(line, want) && json.Unmarshal(line, &fields) == nil {
			out = append(out, fields)
		}
	}
	return out
}

// metric returns the value of one sample line of GET /metrics, by its full
// name with labels as printed.
func (p *agentProc) metric(name string) (float64, error) {
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			return v, err
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}
