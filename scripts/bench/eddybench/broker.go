package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// broker is a mosquitto process for one benchmark, configured as the
// README asks of a broker Eddy reads from (max_inflight_messages 1000,
// max_queued_messages large, persistence on). It mirrors scripts/mosquitto,
// which needs a testing.TB; the benchmarks are a command, not tests.
type broker struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func startBroker(dir string) (*broker, error) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin = "/usr/sbin/mosquitto"
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("mosquitto is not installed: run scripts/install-deps.sh")
		}
	}
	port, err := loopback.Port()
	if err != nil {
		return nil, err
	}
	b := &broker{dir: dir, port: port, done: make(chan struct{})}
	data := filepath.Join(dir, "mosquitto-data") + "/"
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	// autosave_interval: the default (30 min) — the benchmark measures
	// Eddy, not mosquitto writing its database every second.
	conf := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s
max_inflight_messages 1000
max_queued_messages 10000000
max_queued_bytes 0
user root
log_dest file %s
`, port, data, filepath.Join(dir, "mosquitto.log"))
	confPath := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	b.cmd = exec.Command(bin, "-c", confPath)
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start mosquitto: %w", err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return b, nil
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("mosquitto did not listen on %s: %w", b.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *broker) addr() string { return "127.0.0.1:" + strconv.Itoa(b.port) }
func (b *broker) url() string  { return "tcp://" + b.addr() }
func (b *broker) pid() int     { return b.cmd.Process.Pid }

func (b *broker) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}
