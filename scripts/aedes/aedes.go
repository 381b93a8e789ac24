// Package aedes starts a real aedes broker (the Node.js MQTT broker, aedes
// 1.2.0 from npm) for tests: on a free loopback port, with its own
// directory for the script and its log, stopped by PID when the test ends.
//
// aedes differs from mosquitto where Eddy's MQTT source must cope: when a
// client resumes its persistent session, aedes restores the subscription
// before it sends the QoS 1/2 messages it stored while the client was away,
// so live messages arrive ahead of the older stored ones. Its default
// in-memory persistence keeps sessions as long as the broker process runs.
//
// Debian's nodejs runs it; scripts/install-deps.sh installs nodejs and npm
// with apt when missing and aedes (package.json, package-lock.json here)
// into ModulesDir. A test that needs the broker fails (it does not skip)
// when either is missing, so a missing install step cannot pass for a
// green run.
package aedes

import (
	_ "embed"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/nodepkg"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// Version is the aedes release the tests run against (package.json pins it).
const Version = "1.2.0"

//go:embed broker.mjs
var script []byte

// Broker is a running aedes process.
type Broker struct {
	tb      testing.TB
	dir     string
	Port    int
	cmd     *exec.Cmd
	done    chan struct{}
	publogs string // LogPublishes' topic filter
}

// Option changes how Start runs the broker.
type Option func(*Broker)

// LogPublishes makes the broker log every message published to a topic
// that filter matches, as aedes routes it (a QoS 2 message on receipt,
// before its PUBREC), before it writes it to any subscriber: "published
// TOPIC PAYLOAD", one line each. It is the broker's own count of what it
// delivered, across restarts (each process starts its part of the log with
// "aedes listening on").
func LogPublishes(filter string) Option { return func(b *Broker) { b.publogs = filter } }

// ModulesDir is where scripts/install-deps.sh installs aedes:
// $EDDY_AEDES_DIR, else $HOME/.cache/eddy/aedes.
func ModulesDir() string { return nodepkg.Dir("EDDY_AEDES_DIR", "aedes") }

// Node returns the nodejs executable's path, or "" if it is not installed.
func Node() string { return nodepkg.Node() }

// Start starts a broker; it is stopped with SIGTERM at test cleanup.
func Start(tb testing.TB, opts ...Option) *Broker {
	tb.Helper()
	if why := nodepkg.Missing(ModulesDir(), "aedes", Version); why != "" {
		tb.Fatalf("%s: run scripts/install-deps.sh", why)
	}
	b := &Broker{tb: tb, dir: tb.TempDir(), Port: loopback.MustPort(tb)}
	for _, o := range opts {
		o(b)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "broker.mjs"), script, 0o644); err != nil {
		tb.Fatal(err)
	}
	// Cleanups run last-registered first: the log is shown after Stop.
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("aedes log (last 4 KiB):\n%s", tail(b.Log(), 4096))
		}
	})
	b.start()
	tb.Cleanup(b.Stop)
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// URL is the broker's address for paho: tcp://127.0.0.1:PORT.
func (b *Broker) URL() string { return "tcp://127.0.0.1:" + strconv.Itoa(b.Port) }

// Addr is host:port.
func (b *Broker) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

// Dir is the broker's directory (its script and log).
func (b *Broker) Dir() string { return b.dir }

// Log returns the broker's log so far: connects, disconnects, subscribes
// and client errors.
func (b *Broker) Log() string {
	log, _ := os.ReadFile(filepath.Join(b.dir, "aedes.log"))
	return string(log)
}

func (b *Broker) start() {
	b.tb.Helper()
	log, err := os.OpenFile(filepath.Join(b.dir, "aedes.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.tb.Fatal(err)
	}
	defer log.Close() // the child has its own descriptor
	b.cmd = exec.Command(Node(), filepath.Join(b.dir, "broker.mjs"), filepath.Join(ModulesDir(), "node_modules"), strconv.Itoa(b.Port), b.publogs)
	b.cmd.Dir = b.dir
	b.cmd.Stdout, b.cmd.Stderr = log, log
	if err := b.cmd.Start(); err != nil {
		b.tb.Fatalf("start aedes: %v", err)
	}
	b.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(b.cmd, b.done)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.Addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-b.done:
			b.tb.Fatalf("aedes exited at start:\n%s", b.Log())
		default:
		}
		if time.Now().After(deadline) {
			b.tb.Fatalf("aedes did not listen on %s: %v\n%s", b.Addr(), err, b.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart stops the broker if it runs and starts it again on the same port,
// its log continued. The new process has none of the old one's sessions:
// no subscriptions, no stored messages, no QoS 2 packet ids.
func (b *Broker) Restart() {
	b.tb.Helper()
	b.Stop()
	b.start()
}

// Stop stops the broker with SIGTERM (its in-memory sessions are lost) and
// waits for it to exit; after 10 s it is killed. Stopping twice is harmless.
func (b *Broker) Stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}
