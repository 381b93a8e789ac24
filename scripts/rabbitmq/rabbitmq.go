// Package rabbitmq starts a real RabbitMQ broker with its MQTT plugin for
// tests: Debian's rabbitmq-server (3.10) on free loopback ports, with its
// own node name, its own epmd, and every RABBITMQ_* directory under a
// temporary directory, stopped by PID. scripts/install-deps.sh installs the
// package; a test that needs the broker fails (it does not skip) when it is
// missing.
//
// RabbitMQ 3.10's MQTT plugin speaks MQTT 3.1.1 without QoS 2: it answers a
// QoS 2 PUBLISH with PUBACK and delivers the message at QoS 1 (a silent
// downgrade), and it sends a subscriber at most mqtt.prefetch (default 10)
// unacknowledged messages.
//
// Erlang takes seconds to start (about 13 s on the 2-core test machine), so
// start one broker per test package and share it (Shared) rather than one
// per test (Start).
package rabbitmq

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

// Broker is a running RabbitMQ node with the MQTT plugin.
type Broker struct {
	// Port is the MQTT listener's port on 127.0.0.1.
	Port int
	// AMQPPort is the AMQP listener's port on 127.0.0.1.
	AMQPPort int
	dir      string
	cmd      *exec.Cmd
	stdin    *os.File // the wrapper's stdin: it stops the broker when this closes
	done     chan struct{}
	stopOnce sync.Once
	// removeDir: Stop removes dir (Shared's, which no test's TempDir owns).
	removeDir bool
}

// serverScript is the real start script (the one in /usr/sbin switches to
// the rabbitmq user and changes to /var/lib/rabbitmq).
const serverScript = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// startTimeout bounds the wait for an accepted MQTT CONNECT: Erlang and the
// MQTT plugin's Raft cluster start in about 13 s on an idle machine, more
// when the machine is busy.
const startTimeout = 3 * time.Minute

// Installed reports whether rabbitmq-server and its MQTT plugin are
// installed.
func Installed() bool {
	if _, err := os.Stat(serverScript); err != nil {
		return false
	}
	m, _ := filepath.Glob("/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_mqtt-*")
	return len(m) > 0
}

// Start starts a broker for tb alone, stopped at tb's cleanup. conf lines
// are added to rabbitmq.conf (e.g. "mqtt.prefetch = 100").
func Start(tb testing.TB, conf ...string) *Broker {
	tb.Helper()
	b, err := Launch(tb.TempDir(), conf...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Stop)
	return b
}

var shared struct {
	once sync.Once
	b    *Broker
	err  error
}

// Shared returns the test binary's one broker, started by the first call
// (in a directory of its own, removed by Stop). It is not stopped at a
// test's cleanup: it lives until the test binary exits, when its stdin
// closes and the wrapper stops it (or until a TestMain calls StopShared).
// Tests that share it use client ids and topics of their own.
func Shared(tb testing.TB) *Broker {
	tb.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "eddy-rabbitmq-")
		if err != nil {
			shared.err = err
			return
		}
		shared.b, shared.err = Launch(dir)
		if shared.err == nil {
			shared.b.removeDir = true
		}
	})
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.b
}

// StopShared stops the broker Shared started, if any.
func StopShared() {
	if shared.b != nil {
		shared.b.Stop()
	}
}

// MQTTURL is the MQTT listener's address for paho and Eddy:
// tcp://127.0.0.1:PORT.
func (b *Broker) MQTTURL() string { return "tcp://127.0.0.1:" + strconv.Itoa(b.Port) }

// Addr is the MQTT listener's host:port.
func (b *Broker) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

// Dir is the broker's directory: configuration, node data, log.
func (b *Broker) Dir() string { return b.dir }

// Log returns the node's output so far.
func (b *Broker) Log() string {
	log, _ := os.ReadFile(filepath.Join(b.dir, "rabbitmq.log"))
	return string(log)
}

// Launch starts a broker in dir (which must exist) and waits until its MQTT
// listener accepts a CONNECT. The caller stops it with Stop; if the caller
// dies first, the broker stops when the caller's end of the wrapper's
// stdin closes.
func Launch(dir string, conf ...string) (*Broker, error) {
	if !Installed() {
		return nil, errors.New("rabbitmq: rabbitmq-server with the rabbitmq_mqtt plugin is not installed: run scripts/install-deps.sh")
	}
	var ports [4]int
	for i := range ports {
		p, err := loopback.Port()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	b := &Broker{Port: ports[0], AMQPPort: ports[1], dir: dir, done: make(chan struct{})}
	epmdPort, distPort := ports[2], ports[3]
	cfg := fmt.Sprintf(`listeners.tcp.default = 127.0.0.1:%d
mqtt.listeners.tcp.default = 127.0.0.1:%d
mqtt.allow_anonymous = true
loopback_users = none
log.console = true
log.console.level = info
log.file = false
`, b.AMQPPort, b.Port)
	for _, l := range conf {
		cfg += l + "\n"
	}
	files := map[string]string{
		"rabbitmq.conf":     cfg,
		"enabled_plugins":   "[rabbitmq_mqtt].\n",
		"rabbitmq-env.conf": "",
		"advanced.config":   "[].\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	logf, err := os.Create(filepath.Join(dir, "rabbitmq.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// The wrapper runs the node's epmd and the node, and stops both (each
	// by its PID) on SIGTERM or when its stdin closes: the test binary's
	// end of the pipe closes however it exits, so no node outlives it.
	const wrapper = `exec 3<&0
epmd -address 127.0.0.1 -port "$ERL_EPMD_PORT" </dev/null &
epmd_pid=$!
"$1" </dev/null &
node_pid=$!
cat <&3 >/dev/null &
watch_pid=$!
stop() {
	kill -TERM "$node_pid" 2>/dev/null; wait "$node_pid"
	kill -TERM "$epmd_pid" 2>/dev/null; wait "$epmd_pid"
	kill -TERM "$watch_pid" 2>/dev/null
	exit 0
}
trap stop TERM INT
while kill -0 "$node_pid" 2>/dev/null && kill -0 "$watch_pid" 2>/dev/null; do sleep 0.2; done
stop
`
	cmd := exec.Command("/bin/sh", "-c", wrapper, "rabbitmq-wrapper", serverScript)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HOME="+dir, // the Erlang cookie
		"ERL_EPMD_PORT="+strconv.Itoa(epmdPort),
		"RABBITMQ_NODENAME=eddy-"+strconv.Itoa(b.Port)+"@localhost",
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "rabbitmq.pid"),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("rabbitmq: start: %w", err)
	}
	r.Close()
	b.cmd, b.stdin = cmd, w
	go func() { _ = cmd.Wait(); close(b.done) }()
	deadline := time.Now().Add(startTimeout)
	for {
		err := b.probe()
		if err == nil {
			return b, nil
		}
		select {
		case <-b.done:
			return nil, fmt.Errorf("rabbitmq: exited at start:\n%s", tail(b.Log(), 40))
		default:
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("rabbitmq: MQTT listener not ready on %s after %v (%v):\n%s", b.Addr(), startTimeout, err, tail(b.Log(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probe sends an MQTT CONNECT (clean session) and wants an accepted CONNACK:
// the listener opens before the plugin can take sessions.
func (b *Broker) probe() error {
	c, err := net.DialTimeout("tcp", b.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion = "MQTT", 4
	cp.CleanSession, cp.ClientIdentifier, cp.Keepalive = true, "eddy-rabbitmq-probe", 10
	if err := cp.Write(c); err != nil {
		return err
	}
	p, err := packets.ReadPacket(c)
	if err != nil {
		return err
	}
	ack, ok := p.(*packets.ConnackPacket)
	if !ok || ack.ReturnCode != packets.Accepted {
		return fmt.Errorf("CONNECT answered %v", p)
	}
	_ = packets.NewControlPacket(packets.Disconnect).Write(c)
	return nil
}

// Stop stops the broker (SIGTERM to the wrapper, which stops the node and
// its epmd by their PIDs) and waits for it; after 30 s it kills the
// wrapper's process group. Stopping twice is harmless.
func (b *Broker) Stop() {
	b.stopOnce.Do(func() {
		if b.cmd == nil || b.cmd.Process == nil {
			return
		}
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.done
		}
		b.stdin.Close()
		if b.removeDir {
			_ = os.RemoveAll(b.dir)
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
