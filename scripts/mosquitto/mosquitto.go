// Package mosquitto starts a real mosquitto broker for tests: on a free
// loopback port, with its own config, persistence directory and log, stopped
// by PID when the test ends. scripts/install-deps.sh installs the Debian
// package; a test that needs a broker fails (it does not skip) when mosquitto
// is missing, so a missing install step cannot pass for a green run.
package mosquitto

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// Broker is a running mosquitto process.
type Broker struct {
	tb   testing.TB
	dir  string
	Port int
	cmd  *exec.Cmd
	done chan struct{}
	set  settings
}

type settings struct {
	defaultInflight bool
	lines           []string
}

// Option changes the configuration Start writes.
type Option func(*settings)

// DefaultInflight leaves max_inflight_messages unset: mosquitto's default of
// 20 messages in flight per client, as a broker installed with default
// settings has.
func DefaultInflight() Option { return func(s *settings) { s.defaultInflight = true } }

// Conf appends configuration lines, e.g. "max_qos 1" for a broker that
// refuses QoS 2 as AWS IoT Core and Azure IoT Hub do.
func Conf(lines ...string) Option {
	return func(s *settings) { s.lines = append(s.lines, lines...) }
}

// Binary returns the mosquitto executable's path, or "" if it is not installed.
func Binary() string {
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Start starts a broker with persistence on and the flow-control settings
// Eddy needs (see README: max_inflight_messages 1000, max_queued_messages
// large), changed by opts. It is stopped with SIGTERM at test cleanup.
func Start(tb testing.TB, opts ...Option) *Broker {
	tb.Helper()
	if Binary() == "" {
		tb.Fatal("mosquitto is not installed: run scripts/install-deps.sh")
	}
	b := &Broker{tb: tb, dir: tb.TempDir(), Port: loopback.MustPort(tb)}
	for _, o := range opts {
		o(&b.set)
	}
	// Cleanups run last-registered first: the log is shown after Stop.
	tb.Cleanup(func() {
		if tb.Failed() {
			log, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
			tb.Logf("mosquitto log:\n%s", log)
		}
	})
	b.start()
	tb.Cleanup(func() { b.Stop() })
	return b
}

// URL is the broker's address for paho: tcp://127.0.0.1:PORT.
func (b *Broker) URL() string { return "tcp://127.0.0.1:" + strconv.Itoa(b.Port) }

// Dir is the broker's directory (configuration, log, persistence), for
// files a Conf line names.
func (b *Broker) Dir() string { return b.dir }

// Log returns mosquitto's log so far.
func (b *Broker) Log() string {
	log, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
	return string(log)
}

// Addr is host:port.
func (b *Broker) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

func (b *Broker) start() {
	b.tb.Helper()
	conf := filepath.Join(b.dir, "mosquitto.conf")
	data := filepath.Join(b.dir, "data") + "/"
	if err := os.MkdirAll(data, 0o755); err != nil {
		b.tb.Fatal(err)
	}
	cfg := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s
autosave_interval 1
max_queued_messages 1000000
max_queued_bytes 0
user root
log_dest file %s
`, b.Port, data, filepath.Join(b.dir, "mosquitto.log"))
	if !b.set.defaultInflight {
		cfg += "max_inflight_messages 1000\n"
	}
	for _, l := range b.set.lines {
		cfg += l + "\n"
	}
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		b.tb.Fatal(err)
	}
	b.cmd = exec.Command(Binary(), "-c", conf)
	b.cmd.Stdout, b.cmd.Stderr = os.Stderr, os.Stderr
	if err := b.cmd.Start(); err != nil {
		b.tb.Fatalf("start mosquitto: %v", err)
	}
	b.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(b.cmd, b.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.Addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-b.done:
			log, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
			b.tb.Fatalf("mosquitto exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			b.tb.Fatalf("mosquitto did not listen on %s: %v", b.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the broker with SIGTERM, which makes mosquitto save its
// persistent sessions, and waits for it to exit. Stopping twice is harmless.
func (b *Broker) Stop() { b.signal(syscall.SIGTERM) }

// Kill stops the broker with SIGKILL: it loses what it had not saved.
func (b *Broker) Kill() { b.signal(syscall.SIGKILL) }

// Restart stops the broker with SIGTERM and starts it again on the same port
// with the same persistence directory.
func (b *Broker) Restart() {
	b.tb.Helper()
	b.Stop()
	b.start()
}

func (b *Broker) signal(sig syscall.Signal) {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Signal(sig)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}
