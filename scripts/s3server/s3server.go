// Package s3server runs a real S3 server for tests: versitygw (Apache-2.0)
// with its posix backend, on a free loopback port, with a temporary root
// directory and random credentials, stopped by PID when the test ends.
//
// scripts/gotool.sh versitygw builds the binary into ${EDDY_CACHE:-$HOME/.cache/eddy}/bin
// when it is missing (about two minutes, once). A test that needs the server
// fails (it does not skip) when the binary cannot be built, so a missing
// build step cannot pass for a green run.
//
// The posix backend maps every directory directly under Dir to a bucket and
// every object key to a file below it (key "a/b/c" of bucket "x" is the file
// Dir/x/a/b/c); object metadata lives in extended attributes. So a test can
// create a bucket with MakeBucket (a directory) and tamper with an object by
// writing its file.
package s3server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// Server is a running versitygw process.
type Server struct {
	tb testing.TB
	// Port is the loopback TCP port the server listens on; it stays the
	// same across Restart.
	Port int
	// AccessKey and SecretKey are the root user's credentials (random per
	// Server).
	AccessKey, SecretKey string
	// Dir is the posix backend's root: one directory per bucket, one file
	// per object.
	Dir string

	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// Binary returns the versitygw executable, building it with
// scripts/gotool.sh versitygw when the cache holds none. The build runs at most once
// per test process.
func Binary() (string, error) {
	binaryOnce.Do(func() {
		script := filepath.Join(repoRoot(), "scripts", "gotool.sh")
		cmd := exec.Command("bash", script, "versitygw")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			binaryErr = fmt.Errorf("s3server: %s failed: %w", script, err)
			return
		}
		binaryPath = strings.TrimSpace(string(out))
		if _, err := os.Stat(binaryPath); err != nil {
			binaryErr = fmt.Errorf("s3server: %s printed %q: %w", script, binaryPath, err)
		}
	})
	return binaryPath, binaryErr
}

// Start starts versitygw on a free loopback port with an empty root
// directory and random credentials, waits until it answers HTTP, and stops
// it (SIGTERM, then SIGKILL after 10s) at test cleanup. It fails the test if
// the binary cannot be built or the server does not come up.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := Binary(); err != nil {
		tb.Fatal(err)
	}
	logDir := tb.TempDir()
	s := &Server{
		tb:        tb,
		Port:      loopback.MustPort(tb),
		AccessKey: "eddy" + randomHex(tb, 8),
		SecretKey: randomHex(tb, 20),
		Dir:       filepath.Join(tb.TempDir(), "s3"),
		logPath:   filepath.Join(logDir, "versitygw.log"),
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

// Endpoint is host:port for an S3 client (plain HTTP).
func (s *Server) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is http://host:port.
func (s *Server) URL() string { return "http://" + s.Endpoint() }

// MakeBucket creates bucket name as the posix backend sees one: a directory
// under Dir. Creating an existing bucket is harmless.
func (s *Server) MakeBucket(name string) {
	s.tb.Helper()
	if err := os.MkdirAll(filepath.Join(s.Dir, name), 0o755); err != nil {
		s.tb.Fatal(err)
	}
}

// ObjectPath is the file that holds object key of bucket.
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}

// Stop stops the server with SIGTERM and waits for it to exit (SIGKILL after
// 10s). Stopping a stopped server is harmless.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Restart stops the server if it runs and starts it again on the same port,
// with the same directory and credentials.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

func (s *Server) start() {
	s.tb.Helper()
	bin, err := Binary()
	if err != nil {
		s.tb.Fatal(err)
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer logFile.Close()
	s.cmd = exec.Command(bin, "--port", s.Endpoint(), "--access", s.AccessKey,
		"--secret", s.SecretKey, "--quiet", "posix", s.Dir)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// The port may still be held for a moment after a Stop; retry the start
	// until the deadline rather than fail on the first bind error.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := s.cmd.Start(); err != nil {
			s.tb.Fatalf("s3server: start versitygw: %v", err)
		}
		s.done = make(chan struct{})
		go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
		if s.waitReady(deadline) {
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			log, _ := os.ReadFile(s.logPath)
			s.tb.Fatalf("s3server: versitygw did not answer on %s:\n%s", s.Endpoint(), log)
		}
		s.cmd = exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
		s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	}
}

// waitReady polls until the server answers HTTP (any status: an anonymous
// request is refused, which proves it listens). It reports false if the
// process exited first or the deadline passed.
func (s *Server) waitReady(deadline time.Time) bool {
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		resp, err := client.Get(s.URL() + "/")
		if err == nil {
			resp.Body.Close()
			return true
		}
		select {
		case <-s.done:
			time.Sleep(100 * time.Millisecond) // let the port go before the retry
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

func randomHex(tb testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// repoRoot is the module root, found from this source file's location so
// tests in any package (and any working directory) find the script.
func repoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("s3server: runtime.Caller failed")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
