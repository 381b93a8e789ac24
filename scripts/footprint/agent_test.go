//go:build linux

package footprint

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// distBinary returns the release binary name in EDDY_DIST (a relative path is
// taken from the repository root), or skips the test when EDDY_DIST is unset.
func distBinary(t *testing.T, name string) string {
	t.Helper()
	dist := os.Getenv("EDDY_DIST")
	if dist == "" {
		t.Skip("EDDY_DIST is unset: run scripts/build.sh, then EDDY_DIST=dist go test ./scripts/footprint/ (scripts/test.sh does)")
	}
	if !filepath.IsAbs(dist) {
		// Relative to the repository root, where scripts/test.sh runs; go
		// test runs the test in this package's directory, two levels down.
		dist = filepath.Join("..", "..", dist)
	}
	bin, err := filepath.Abs(filepath.Join(dist, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("release binary missing (run scripts/build.sh): %v", err)
	}
	return bin
}

// runningAgent is an eddy process started by startAgent.
type runningAgent struct {
	cmd       *exec.Cmd
	pid       int
	stdoutN   atomic.Int64 // lines the agent wrote to stdout (stdout sinks)
	mu        sync.Mutex
	log       strings.Builder // stderr
	readers   sync.WaitGroup
	startedAt time.Time
	dir       string // the agent's working directory: "%DIR%" in its config
}

// startAgent runs bin with the config text (written to a temp dir, where
// "%DIR%" is replaced by that dir) and returns once it logs "eddy started".
// The agent is stopped with SIGTERM when the test ends, and must then exit 0.
func startAgent(t *testing.T, bin, config string) *runningAgent {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "eddy.hcl")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(config, "%DIR%", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &runningAgent{cmd: exec.Command(bin, "run", "-c", path), dir: dir}
	a.cmd.Dir = dir
	// If the test binary dies (a CI step killed, a timeout), the agent dies
	// with it instead of running on unobserved.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.pid = a.cmd.Process.Pid
	started := make(chan struct{})
	a.readers.Add(2)
	go func() {
		defer a.readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			a.stdoutN.Add(1)
		}
	}()
	go func() {
		defer a.readers.Done()
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			a.mu.Lock()
			a.log.WriteString(sc.Text() + "\n")
			a.mu.Unlock()
			if strings.Contains(sc.Text(), `msg="eddy started"`) {
				once.Do(func() { close(started) })
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() { a.stop(t) })
	select {
	case <-started:
		a.startedAt = time.Now()
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not log \"eddy started\" within 30 s:\n%s", a.logText())
	}
	return a
}

func (a *runningAgent) logText() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.log.String()
}

// stop sends SIGTERM (a clean stop with a final checkpoint) and waits for
// exit 0. Calling it again does nothing.
func (a *runningAgent) stop(t *testing.T) {
	t.Helper()
	if a.cmd.ProcessState != nil {
		return
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	a.readers.Wait()
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v\n%s", err, a.logText())
	}
}

// wait blocks for d of wall-clock time: the footprint measurements are
// averages over real time, so this is the one place the tests sleep.
func wait(d time.Duration) { <-time.After(d) }
