// Package mqttjs runs MQTT.js (npm's mqtt 5.16.0, the JavaScript MQTT
// client) for tests: an MQTT 5 client independent of Eddy's own code that
// publishes readings with user properties and a content type (Publish), and
// subscribes to see the properties on what Eddy publishes (Subscribe).
//
// Debian's nodejs runs it; scripts/install-deps.sh installs the package
// (package.json, package-lock.json here) into ModulesDir. A test that needs
// it fails (it does not skip) when either is missing, so a missing install
// step cannot pass for a green run.
package mqttjs

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/nodepkg"
)

// Version is the mqtt release the tests run against (package.json pins it).
const Version = "5.16.0"

//go:embed publish.cjs
var publishScript []byte

//go:embed subscribe.cjs
var subscribeScript []byte

// ModulesDir is where scripts/install-deps.sh installs the package:
// $EDDY_MQTTJS_DIR, else $HOME/.cache/eddy/mqttjs.
func ModulesDir() string { return nodepkg.Dir("EDDY_MQTTJS_DIR", "mqttjs") }

// Message is one message to publish.
type Message struct {
	Topic          string            `json:"topic"`
	Payload        string            `json:"payload"`
	QoS            int               `json:"qos"`
	UserProperties map[string]string `json:"userProperties,omitempty"`
	ContentType    string            `json:"contentType,omitempty"`
}

// Publish connects to broker (tcp://host:port) as clientID at MQTT 5 with
// a clean start, publishes msgs in order (without waiting for each
// acknowledgement before the next), waits for every acknowledgement, and
// disconnects.
func Publish(tb testing.TB, broker, clientID string, msgs []Message) {
	tb.Helper()
	p, err := Connect(broker, clientID)
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	if err := p.Publish(msgs); err != nil {
		tb.Fatal(err)
	}
	if err := p.Close(); err != nil {
		tb.Fatal(err)
	}
}

// Publisher is one MQTT.js client in a node process, connected until
// Close.
type Publisher struct {
	cmd    *exec.Cmd
	dir    string
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
	closed bool
	err    error
}

// Connect starts a node process whose MQTT.js client connects to broker
// (tcp://host:port) as clientID at MQTT 5 with a clean start.
func Connect(broker, clientID string) (*Publisher, error) {
	if why := nodepkg.Missing(ModulesDir(), "mqtt", Version); why != "" {
		return nil, fmt.Errorf("%s: run scripts/install-deps.sh", why)
	}
	dir, err := os.MkdirTemp("", "eddy-mqttjs-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "publish.cjs"), publishScript, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &Publisher{dir: dir, cmd: exec.Command(nodepkg.Node(), filepath.Join(dir, "publish.cjs"), filepath.Join(ModulesDir(), "node_modules"))}
	p.cmd.Stderr = &p.stderr
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.out = bufio.NewScanner(stdout)
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	hello, _ := json.Marshal(map[string]string{"broker": "mqtt://" + strings.TrimPrefix(broker, "tcp://"), "clientId": clientID})
	if _, err := p.in.Write(append(hello, '\n')); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Publish publishes msgs in order and returns once every one is
// acknowledged.
func (p *Publisher) Publish(msgs []Message) error {
	b, err := json.Marshal(msgs)
	if err != nil {
		return err
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("MQTT.js publish: %v\n%s", err, p.stderr.String())
	}
	if !p.out.Scan() {
		return fmt.Errorf("MQTT.js publish: no answer (%v)\n%s", p.out.Err(), p.stderr.String())
	}
	var resp struct{ Published int }
	if err := json.Unmarshal(p.out.Bytes(), &resp); err != nil || resp.Published != len(msgs) {
		return fmt.Errorf("MQTT.js publish: %q (%v), want %d published", p.out.Bytes(), err, len(msgs))
	}
	return nil
}

// Close disconnects and waits for the node process to end. Later calls
// return the first one's result.
func (p *Publisher) Close() error {
	if p.closed {
		return p.err
	}
	p.closed = true
	p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		p.err = fmt.Errorf("MQTT.js: %v\n%s", err, p.stderr.String())
	}
	os.RemoveAll(p.dir)
	return p.err
}

// Received is one message a Subscriber received, as MQTT.js decodes it.
type Received struct {
	Topic   string `json:"topic"`
	Payload string `json:"payload"`
	QoS     int    `json:"qos"`
	// UserProperties maps each user property's name to its value, a
	// string, or to a list of its values when the name repeats.
	UserProperties map[string]any `json:"userProperties"`
	ContentType    string         `json:"contentType"`
	// MessageExpiryInterval is in seconds, 0 when the PUBLISH has none.
	MessageExpiryInterval uint32 `json:"messageExpiryInterval"`
}

// Subscriber is an MQTT.js client in a node process, subscribed until the
// test ends.
type Subscriber struct {
	tb     testing.TB
	stderr string // the file node's stderr goes to
	mu     sync.Mutex
	msgs   []Received
	ready  bool  // MQTT.js said it is subscribed
	ended  bool  // node's stdout ended
	bad    error // a line that is no message
}

// Subscribe starts a node process whose MQTT.js client connects to broker
// (tcp://host:port) as clientID at MQTT 5 with a clean start and
// subscribes to filter at QoS 2; it returns once the broker granted the
// subscription. The process is killed when the test ends.
func Subscribe(tb testing.TB, broker, clientID, filter string) *Subscriber {
	tb.Helper()
	if why := nodepkg.Missing(ModulesDir(), "mqtt", Version); why != "" {
		tb.Fatalf("%s: run scripts/install-deps.sh", why)
	}
	dir := tb.TempDir()
	s := &Subscriber{tb: tb, stderr: filepath.Join(dir, "stderr")}
	if err := os.WriteFile(filepath.Join(dir, "subscribe.cjs"), subscribeScript, 0o644); err != nil {
		tb.Fatal(err)
	}
	stderr, err := os.Create(s.stderr)
	if err != nil {
		tb.Fatal(err)
	}
	defer stderr.Close() // the child has its own descriptor
	cmd := exec.Command(nodepkg.Node(), filepath.Join(dir, "subscribe.cjs"), filepath.Join(ModulesDir(), "node_modules"),
		"mqtt://"+strings.TrimPrefix(broker, "tcp://"), clientID, filter, "2")
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start MQTT.js: %v", err)
	}
	done := make(chan struct{})
	go s.read(stdout, done)
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	})
	await.Until(tb, 20*time.Second, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case s.ready:
			return nil
		case s.ended || s.bad != nil:
			return fmt.Errorf("MQTT.js did not subscribe to %q: %v\n%s", filter, s.bad, s.errors())
		}
		return errors.New("MQTT.js has not subscribed yet")
	})
	return s
}

// read parses node's stdout until it ends.
func (s *Subscriber) read(stdout io.Reader, done chan<- struct{}) {
	defer close(done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m struct {
			Subscribed bool `json:"subscribed"`
			Received
		}
		err := json.Unmarshal(sc.Bytes(), &m)
		s.mu.Lock()
		switch {
		case err != nil:
			s.bad = fmt.Errorf("MQTT.js wrote %.200q: %v", sc.Bytes(), err)
		case m.Subscribed:
			s.ready = true
		default:
			s.msgs = append(s.msgs, m.Received)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

// errors is what node wrote to stderr.
func (s *Subscriber) errors() string {
	b, _ := os.ReadFile(s.stderr)
	return string(b)
}

// Messages returns the messages received so far, in the order received.
func (s *Subscriber) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// Await waits up to timeout until at least n messages were received and
// returns all received so far; it fails the test (Fatal) when they are not.
func (s *Subscriber) Await(n int, timeout time.Duration) []Received {
	s.tb.Helper()
	await.Until(s.tb, timeout, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case len(s.msgs) >= n:
			return nil
		case s.bad != nil:
			return s.bad
		case s.ended:
			return fmt.Errorf("MQTT.js ended after %d of %d messages\n%s", len(s.msgs), n, s.errors())
		}
		return fmt.Errorf("MQTT.js received %d of %d messages", len(s.msgs), n)
	})
	return s.Messages()
}
