// Package mqttjs runs MQTT.js (npm's mqtt 5.16.0, the JavaScript MQTT
// client) for tests: an MQTT 5 client independent of Eddy's own code that
// publishes readings with user properties and a content type.
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
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/scripts/nodepkg"
)

// Version is the mqtt release the tests run against (package.json pins it).
const Version = "5.16.0"

//go:embed publish.cjs
var script []byte

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
	if err := os.WriteFile(filepath.Join(dir, "publish.cjs"), script, 0o644); err != nil {
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
