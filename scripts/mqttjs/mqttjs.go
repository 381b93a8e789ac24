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
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Version is the mqtt release the tests run against (package.json pins it).
const Version = "5.16.0"

//go:embed publish.cjs
var script []byte

// ModulesDir is where scripts/install-deps.sh installs the package:
// $EDDY_MQTTJS_DIR, else $HOME/.cache/eddy/mqttjs; the modules are in its
// node_modules.
func ModulesDir() string {
	if d := os.Getenv("EDDY_MQTTJS_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "eddy", "mqttjs")
}

func node() string {
	for _, name := range []string{"node", "nodejs"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// installed returns why MQTT.js cannot run, or "".
func installed() string {
	if node() == "" {
		return "nodejs is not installed"
	}
	b, err := os.ReadFile(filepath.Join(ModulesDir(), "node_modules", "mqtt", "package.json"))
	if err != nil {
		return "mqtt (MQTT.js) is not installed in " + ModulesDir()
	}
	var pkg struct{ Version string }
	if json.Unmarshal(b, &pkg) != nil || pkg.Version != Version {
		return "mqtt (MQTT.js) " + pkg.Version + " is installed in " + ModulesDir() + ", the tests pin " + Version
	}
	return ""
}

// Message is one message to publish.
type Message struct {
	Topic          string            `json:"topic"`
	Payload        string            `json:"payload"`
	QoS            int               `json:"qos"`
	UserProperties map[string]string `json:"userProperties,omitempty"`
	ContentType    string            `json:"contentType,omitempty"`
}

// Publish connects to broker (tcp://host:port) as clientID at MQTT 5 with
// a clean start, publishes msgs in order, each acknowledged before the
// next, and disconnects.
func Publish(tb testing.TB, broker, clientID string, msgs []Message) {
	tb.Helper()
	if err := PublishErr(broker, clientID, msgs); err != nil {
		tb.Fatal(err)
	}
}

// PublishErr is Publish without a testing.TB, for goroutines.
func PublishErr(broker, clientID string, msgs []Message) error {
	if why := installed(); why != "" {
		return fmt.Errorf("%s: run scripts/install-deps.sh", why)
	}
	dir, err := os.MkdirTemp("", "eddy-mqttjs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "publish.cjs"), script, 0o644); err != nil {
		return err
	}
	req, err := json.Marshal(struct {
		Broker   string    `json:"broker"`
		ClientID string    `json:"clientId"`
		Messages []Message `json:"messages"`
	}{"mqtt://" + strings.TrimPrefix(broker, "tcp://"), clientID, msgs})
	if err != nil {
		return err
	}
	cmd := exec.Command(node(), filepath.Join(dir, "publish.cjs"), filepath.Join(ModulesDir(), "node_modules"))
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("MQTT.js publish: %v\n%s", err, stderr.String())
	}
	var resp struct{ Published int }
	if err := json.Unmarshal(out, &resp); err != nil || resp.Published != len(msgs) {
		return fmt.Errorf("MQTT.js publish: %q (%v), want %d published", out, err, len(msgs))
	}
	return nil
}
