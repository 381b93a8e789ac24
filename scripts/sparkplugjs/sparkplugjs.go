// Package sparkplugjs runs Cirrus Link's Sparkplug B payload codec (npm's
// sparkplug-payload 1.0.3, the Eclipse Tahu JavaScript library) for tests:
// the counterpart that decodes the payloads Eddy encodes and encodes the
// payloads Eddy must decode.
//
// Debian's nodejs runs it; scripts/install-deps.sh installs the package
// (package.json, package-lock.json here) into ModulesDir. A test that needs
// it fails (it does not skip) when either is missing, so a missing install
// step cannot pass for a green run.
package sparkplugjs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eddy-edge/eddy/scripts/nodepkg"
)

// Version is the sparkplug-payload release the tests run against
// (package.json pins it).
const Version = "1.0.3"

//go:embed codec.cjs
var script []byte

// ModulesDir is where scripts/install-deps.sh installs the package:
// $EDDY_SPARKPLUGJS_DIR, else $HOME/.cache/eddy/sparkplugjs.
func ModulesDir() string { return nodepkg.Dir("EDDY_SPARKPLUGJS_DIR", "sparkplugjs") }

// Payload is a payload as sparkplug-payload represents it. 64-bit
// integers are decimal strings, bytes {"base64": ...}.
type Payload struct {
	Timestamp any      `json:"timestamp,omitempty"`
	Seq       any      `json:"seq,omitempty"`
	UUID      string   `json:"uuid,omitempty"`
	Body      any      `json:"body,omitempty"`
	Metrics   []Metric `json:"metrics"`
}

// Metric is one metric as sparkplug-payload represents it; Type is the
// datatype's name ("Double", "UInt64", …).
type Metric struct {
	Name         *string `json:"name,omitempty"`
	Alias        any     `json:"alias,omitempty"`
	Type         string  `json:"type"`
	Value        any     `json:"value"`
	Timestamp    any     `json:"timestamp,omitempty"`
	IsHistorical *bool   `json:"isHistorical,omitempty"`
	IsTransient  *bool   `json:"isTransient,omitempty"`
	IsNull       *bool   `json:"isNull,omitempty"`
}

// Run decodes each payload of decode and encodes each of encode with
// sparkplug-payload, in one node process.
func Run(tb testing.TB, decode [][]byte, encode []Payload) (decoded []Payload, encoded [][]byte) {
	tb.Helper()
	if why := nodepkg.Missing(ModulesDir(), "sparkplug-payload", Version); why != "" {
		tb.Fatalf("%s: run scripts/install-deps.sh", why)
	}
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "codec.cjs"), script, 0o644); err != nil {
		tb.Fatal(err)
	}
	req, err := json.Marshal(struct {
		Decode [][]byte  `json:"decode"`
		Encode []Payload `json:"encode"`
	}{decode, encode})
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(nodepkg.Node(), filepath.Join(dir, "codec.cjs"), filepath.Join(ModulesDir(), "node_modules"))
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("sparkplug-payload codec: %v\n%s", err, stderr.String())
	}
	var resp struct {
		Decoded []Payload `json:"decoded"`
		Encoded [][]byte  `json:"encoded"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&resp); err != nil {
		tb.Fatalf("sparkplug-payload codec output: %v\n%s", err, out)
	}
	return resp.Decoded, resp.Encoded
}
