package e2e

// The harness of the tests that run the real eddy binary: TestMain builds it
// once; a test writes a configuration from a template (writeConfig), starts
// `eddy run` (startEddy, or startAgent with an admin endpoint) and drives it
// through an eddyProc: wait for a log line, signal, kill, wait for the exit.
// Every process a test starts is killed and reaped when that test ends, and
// its output is printed if the test failed, so test messages need not
// carry logs themselves.
//
// The harness is safe for parallel tests (each process belongs to its
// test; directories come from t.TempDir, ports from scripts/loopback). The
// crash, full-disk, corrupt-checkpoint, restart, upload, WAL-drain and
// keyed model tests run with t.Parallel: they spend most of their time
// waiting on child processes, outages and the disk, and their assertions
// wait on conditions, not on time. Tests that bound a duration (checkpoint
// timeouts, rates, a line within seconds) stay serial.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// eddyBin is the eddy binary built by TestMain from this module.
var eddyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "eddy-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	eddyBin = filepath.Join(dir, "eddy")
	// The tests run from the repository's top, as a user runs eddy from a
	// checkout: examples/ and testdata paths read as the docs write them,
	// and every eddy started inherits that working directory.
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := exec.Command("go", "build", "-o", eddyBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build eddy: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// replaceAll replaces, in order, every occurrence of kv[0] by kv[1], then of
// kv[2] by kv[3], and so on; a trailing odd element is ignored.
func replaceAll(s string, kv ...string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		s = strings.ReplaceAll(s, kv[i], kv[i+1])
	}
	return s
}

// writeConfig writes the configuration template tmpl to dir/agent.hcl and
// returns that path. It first applies the test's own replacements kv (as
// replaceAll), then the usual placeholders: %DATA% becomes dir/data and %DIR%
// becomes dir. Any other placeholder is left as it is. It fails the test
// when the file cannot be written.
func writeConfig(t testing.TB, dir, tmpl string, kv ...string) string {
	t.Helper()
	cfg := replaceAll(replaceAll(tmpl, kv...), "%DATA%", filepath.Join(dir, "data"), "%DIR%", dir)
	path := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// eddyProc is one eddy process started by startEddy.
type eddyProc struct {
	t    testing.TB
	cmd  *exec.Cmd
	out  syncBuffer
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // cmd.Wait's result; read it only after done is closed
	// admin is the admin endpoint's address (host:port), set by startAgent;
	// "" for a process started without one.
	admin string
}

// startEddy starts the eddy binary with args (for example "run", "-c",
// path), its stdout and stderr collected together (output). It fails the
// test when the process cannot be started. When the test ends, whether it
// passed or not, the process is killed with SIGKILL (if still running) and
// reaped, in a cleanup registered here: cleanups run last-registered first,
// so this happens before the removal of any t.TempDir made before the start.
// If the test failed, its command line, exit status and whole output are
// logged then.
func startEddy(t testing.TB, args ...string) *eddyProc {
	t.Helper()
	return startBinary(t, eddyBin, args...)
}

// startBinary is startEddy of another eddy binary, bin: a build of an
// earlier commit, for the upgrade tests.
func startBinary(t testing.TB, bin string, args ...string) *eddyProc {
	t.Helper()
	p := &eddyProc{t: t, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // an error once it has exited: harmless
		<-p.done
		if t.Failed() {
			t.Logf("eddy %s (pid %d, %v) output:\n%s", strings.Join(args, " "), p.cmd.Process.Pid, p.err, p.output())
		}
	})
	return p
}

// runEddy runs the eddy binary with args to its end (no time limit but the
// test's) and returns its combined output and exit error, like
// exec.Cmd.CombinedOutput. The output is also logged if the test fails.
func runEddy(t testing.TB, args ...string) (string, error) {
	t.Helper()
	p := startEddy(t, args...)
	<-p.done
	return p.output(), p.err
}

// runToEndWith writes the configuration template tmpl (writeConfig's
// placeholders) into dir and runs `eddy run` on it to the end of its input;
// it fails the test if eddy exits non-zero.
func runToEndWith(t testing.TB, dir, tmpl string) {
	t.Helper()
	if _, err := runEddy(t, "run", "-c", writeConfig(t, dir, tmpl)); err != nil {
		t.Fatalf("eddy run: %v", err)
	}
}

// output returns what the process has written to stdout and stderr so far;
// all of it once done is closed.
func (p *eddyProc) output() string { return p.out.String() }

// logContains reports whether the output so far contains s.
func (p *eddyProc) logContains(s string) bool { return strings.Contains(p.output(), s) }

// waitLog waits up to d for s to appear in the output and reports whether
// it did.
func (p *eddyProc) waitLog(s string, d time.Duration) bool {
	return await.Holds(d, func() bool { return p.logContains(s) })
}

// exited reports, without waiting, whether the process has exited and been
// reaped.
func (p *eddyProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit and reports whether it did;
// after true, p.err holds its exit status. The process is left running on
// false.
func (p *eddyProc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// signal sends sig to the process; an error (it has exited) is ignored.
func (p *eddyProc) signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// kill kills the process with SIGKILL and returns once it has been reaped.
func (p *eddyProc) kill() {
	p.signal(os.Kill)
	<-p.done
}

// stop sends sig (SIGTERM or os.Interrupt: a graceful stop) and waits up to
// d for the process to exit. It fails the test if the process has not
// exited by then (it is killed at the test's end) or exited non-zero.
func (p *eddyProc) stop(sig os.Signal, d time.Duration) {
	p.t.Helper()
	p.signal(sig)
	if !p.wait(d) {
		p.t.Fatalf("agent did not exit within %v of %q", d, sig)
	}
	if p.err != nil {
		p.t.Fatalf("agent exited with %v after %q", p.err, sig)
	}
}

// startAgent writes tmpl into dir as writeConfig does, with %ADMIN% replaced
// by a free loopback address, starts `eddy run` on it, and returns once the
// admin endpoint answers /healthz. It fails the test if that takes more than
// 15 s. The process is reaped at the test's end as startEddy says.
func startAgent(t testing.TB, dir, tmpl string, kv ...string) *eddyProc {
	t.Helper()
	admin := loopback.Addr(t)
	path := writeConfig(t, dir, tmpl, append(kv[:len(kv):len(kv)], "%ADMIN%", admin)...)
	p := startEddy(t, "run", "-c", path)
	p.admin = admin
	if !await.Holds(15*time.Second, func() bool { return healthzStatus(admin) != 0 }) {
		t.Fatal("agent did not become healthy")
	}
	return p
}

// healthzStatus returns the HTTP status with which the admin endpoint at
// admin answers /healthz, or 0 if it does not answer.
func healthzStatus(admin string) int {
	resp, err := http.Get("http://" + admin + "/healthz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

type pipelineStatus struct {
	Name         string `json:"name"`
	ReadingsIn   uint64 `json:"readings_in"`
	ResultsOut   uint64 `json:"results_out"`
	DeadLettered uint64 `json:"dead_lettered"`
}

// status returns the pipelines' status from the admin endpoint; nil if it
// does not answer.
func (p *eddyProc) status(t *testing.T) []pipelineStatus {
	t.Helper()
	resp, err := http.Get("http://" + p.admin + "/api/pipelines")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st []pipelineStatus
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return st
}

// connected reports whether the agent's MQTT source is connected to its
// broker, by its eddy_mqtt_connected metric.
func (p *eddyProc) connected(t *testing.T, source string) bool {
	return sourceConnected(p.admin, source)
}

// sourceConnected is connected for the agent whose admin endpoint is admin.
func sourceConnected(admin, source string) bool {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	want := `eddy_mqtt_connected{source="` + source + `"} 1`
	for sc.Scan() {
		if sc.Text() == want {
			return true
		}
	}
	return false
}

// syncBuffer collects a process's output while the test reads it: Write and
// String are safe to call concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// checkpointIDs returns the last triggered and last completed checkpoint
// ids from the agent's /api/checkpoints; ok is false if it does not answer.
func (p *eddyProc) checkpointIDs() (triggered, completed uint64, ok bool) {
	resp, err := http.Get("http://" + p.admin + "/api/checkpoints")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	var r struct {
		LastTriggeredID uint64 `json:"last_triggered_id"`
		LastCompletedID uint64 `json:"last_completed_id"`
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil {
		return 0, 0, false
	}
	return r.LastTriggeredID, r.LastCompletedID, true
}

// waitCheckpointAfter waits until a checkpoint triggered after the call has
// completed: it holds everything the agent processed before the call. The
// agent skips periodic checkpoints while nothing changes, so nudge must give
// it some new input that does not change what the test checks.
func (p *eddyProc) waitCheckpointAfter(t *testing.T, d time.Duration, nudge func()) {
	t.Helper()
	var before uint64
	await.True(t, d, `ok`, func() bool {
		var ok bool
		before, _, ok = p.checkpointIDs()
		return ok
	})
	nudge()
	await.True(t, d, `done > before`, func() bool {
		_, done, _ := p.checkpointIDs()
		return done > before
	})
}

// readyzCheck returns /readyz's status and the named check's detail ("" if
// the check is absent or the endpoint does not answer).
func readyzCheck(admin, name string) (int, bool, string) {
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		return 0, false, ""
	}
	defer resp.Body.Close()
	var rd struct {
		Checks []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		return resp.StatusCode, false, ""
	}
	for _, c := range rd.Checks {
		if c.Name == name {
			return resp.StatusCode, c.OK, c.Detail
		}
	}
	return resp.StatusCode, false, ""
}
