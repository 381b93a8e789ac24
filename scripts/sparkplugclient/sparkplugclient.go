// Package sparkplugclient runs Cirrus Link's Sparkplug B edge node client
// (npm's sparkplug-client 3.2.4, the Eclipse Tahu JavaScript library) for
// tests: a real edge node publishing births, data by alias and its death
// through a broker, which Eddy's Sparkplug source reads.
//
// Debian's nodejs runs it. The package (package.json, package-lock.json
// here) is installed with npm ci on first use, into a directory named by
// the lock file's hash, so a changed lock installs afresh and no earlier
// install is trusted blindly. A test that needs it fails (it does not
// skip) when node or npm is missing.
package sparkplugclient

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

var (
	//go:embed package.json
	packageJSON []byte
	//go:embed package-lock.json
	packageLock []byte
	//go:embed edge.cjs
	script []byte
)

// installed is the file npm ci's success leaves in the install directory.
const installed = ".eddy-installed"

// modules installs the package, once per lock file, and returns its
// node_modules directory.
func modules(tb testing.TB) string {
	tb.Helper()
	sum := sha256.Sum256(append(append([]byte(nil), packageJSON...), packageLock...))
	dir := filepath.Join(os.TempDir(), "eddy-sparkplugclient-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	// Tests of several packages may install at once: one does, the others
	// wait for it.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, installed)); err == nil {
		return filepath.Join(dir, "node_modules")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		tb.Fatal("npm is not installed: run scripts/install-deps.sh")
	}
	for name, b := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	cmd := exec.Command(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("npm ci sparkplug-client: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, installed), nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(dir, "node_modules")
}

func node(tb testing.TB) string {
	for _, name := range []string{"node", "nodejs"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	tb.Fatal("nodejs is not installed: run scripts/install-deps.sh")
	return ""
}

// Edge is one running edge node: group GROUP, node NODE, device dev1.
type Edge struct {
	tb    testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	n     int // commands sent

	mu     sync.Mutex
	lines  []string
	stderr strings.Builder
	exited chan struct{}
}

// Start starts an edge node connecting to the broker at url as clientID,
// and waits until it is connected. It is stopped when the test ends.
func Start(tb testing.TB, url, group, nodeID, clientID string) *Edge {
	tb.Helper()
	mods := modules(tb)
	path := filepath.Join(tb.TempDir(), "edge.cjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		tb.Fatal(err)
	}
	e := &Edge{tb: tb, exited: make(chan struct{})}
	e.cmd = exec.Command(node(tb), path, mods, url, group, nodeID, clientID)
	var err error
	if e.stdin, err = e.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	out, err := e.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	e.cmd.Stderr = &lockedWriter{e}
	if err := e.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			e.mu.Lock()
			e.lines = append(e.lines, sc.Text())
			e.mu.Unlock()
		}
		_ = e.cmd.Wait()
		close(e.exited)
	}()
	tb.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		<-e.exited
		if tb.Failed() {
			tb.Logf("sparkplug-client edge node output: %q\n%s", e.Lines(), e.stderrText())
		}
	})
	e.WaitFor("connected")
	return e
}

type lockedWriter struct{ e *Edge }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	return w.e.stderr.Write(p)
}

func (e *Edge) stderrText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stderr.String()
}

// Lines are the events the edge node printed so far.
func (e *Edge) Lines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.lines)
}

// WaitFor waits until the edge node printed line.
func (e *Edge) WaitFor(line string) {
	e.tb.Helper()
	await.True(e.tb, 30*time.Second, "edge node printed "+line, func() bool { return slices.Contains(e.Lines(), line) })
}

// Command is one command of edge.cjs: Op "births", "data", "gap",
// "rebirth" or "stop"; TS and Temp for births, data and rebirth.
type Command struct {
	Op   string  `json:"op"`
	TS   int64   `json:"ts,omitempty"`
	Temp float64 `json:"temp"`
}

// Do sends commands and waits until the edge node has carried them out
// (its MQTT client has them; sparkplug-client publishes at QoS 0, so the
// broker may still be forwarding them).
func (e *Edge) Do(cmds ...Command) {
	e.tb.Helper()
	for _, c := range cmds {
		b, _ := json.Marshal(c)
		if _, err := e.stdin.Write(append(b, '\n')); err != nil {
			e.tb.Fatalf("edge node: %v", err)
		}
		if c.Op == "stop" {
			select {
			case <-e.exited:
			case <-time.After(30 * time.Second):
				e.tb.Fatal("edge node did not stop")
			}
			return
		}
		e.n++
		e.WaitFor("done " + strconv.Itoa(e.n))
	}
}
