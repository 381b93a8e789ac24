package source

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
)

// mosquitto is a real broker for a test: a free loopback port, persistence
// in a temp dir, the settings DESIGN.md asks of a broker in front of Eddy.
type mosquitto struct {
	t    testing.TB
	port int
	conf string
	cmd  *exec.Cmd
	exit chan struct{}
}

// startMosquitto starts a broker and stops it at the end of the test; it
// skips the test when mosquitto is not installed.
func startMosquitto(t testing.TB) *mosquitto {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/mosquitto"); err2 != nil {
			t.Skip("mosquitto not installed (apt-get install mosquitto): skipping the real-broker test")
		}
		bin = "/usr/sbin/mosquitto"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	content := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s/
max_inflight_messages 1000
max_queued_messages 1000000
user root
`, port, dir)
	if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &mosquitto{t: t, port: port, conf: conf}
	m.cmd = exec.Command(bin, "-c", conf)
	m.start()
	t.Cleanup(m.stop)
	return m
}

func (m *mosquitto) URL() string { return "tcp://127.0.0.1:" + strconv.Itoa(m.port) }

func (m *mosquitto) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.cmd.Path, "-c", m.conf)
	if testing.Verbose() {
		m.cmd.Stderr = os.Stderr
	}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start mosquitto: %v", err)
	}
	m.exit = make(chan struct{})
	go func(cmd *exec.Cmd, exit chan struct{}) {
		cmd.Wait()
		close(exit)
	}(m.cmd, m.exit)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(m.port))
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-m.exit:
			m.t.Fatalf("mosquitto exited at start (port %d)", m.port)
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mosquitto not listening on %d: %v", m.port, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a process's readiness
	}
}

// stop terminates the broker with SIGTERM (it saves its persistent state)
// and waits for it to exit. Stopping a stopped broker does nothing.
func (m *mosquitto) stop() {
	if m.exit == nil {
		return
	}
	select {
	case <-m.exit:
	default:
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exit:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.exit
		}
	}
	m.exit = nil
}

// restart stops the broker and starts it again on the same port with the
// same persistent state.
func (m *mosquitto) restart() {
	m.t.Helper()
	m.stop()
	m.start()
}
