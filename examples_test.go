package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/config"
)

// selfContained reports whether cfg runs on this machine alone: its sources
// are files, simulators or the embedded broker, and it sends nothing
// upstream or to S3.
func selfContained(cfg *config.Config) bool {
	if cfg.Upload != nil {
		return false
	}
	for _, s := range cfg.Sources {
		if s.MQTT != nil && s.MQTT.Broker != "embedded" {
			return false
		}
	}
	for _, s := range cfg.Sinks {
		if s.MQTT != nil {
			return false
		}
	}
	return true
}

// fixedAddr matches the fixed loopback ports examples listen on, replaced
// by free ones so a run cannot collide with anything else on the machine.
var fixedAddr = regexp.MustCompile(`"127\.0\.0\.1:\d+"`)

// TestExamples_ValidateAndRun: every configuration in examples/ passes
// `eddy validate`, and every self-contained one runs from the repository's
// top as its comment says: it either ends by itself with exit 0 after
// printing results, or prints a window result, then stops cleanly on
// SIGTERM.
func TestExamples_ValidateAndRun(t *testing.T) {
	paths, err := filepath.Glob("examples/*.hcl")
	if err != nil || len(paths) < 3 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if out, err := runEddy(t, "validate", "-c", path); err != nil {
				t.Fatalf("eddy validate -c %s: %v\n%s", path, err, out)
			}
			cfg, diags := config.Loader{}.Load(path)
			if diags.HasErrors() {
				t.Fatal(config.FormatDiagnostics(diags))
			}
			if !selfContained(cfg) {
				t.Logf("%s needs an external broker or S3: validated only", path)
				return
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// data_dir and relative paths resolve against the working
			// directory: run in the repository's top, data_dir moved away.
			text := fixedAddr.ReplaceAllString(string(data), `"127.0.0.1:0"`)
			text = regexp.MustCompile(`data_dir *= *"[^"]*"`).ReplaceAllString(text, `data_dir = "`+filepath.Join(t.TempDir(), "data")+`"`)
			conf := filepath.Join(t.TempDir(), filepath.Base(path))
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			p := startEddy(t, "run", "-c", conf)
			result := func() bool {
				out := p.output()
				return strings.Contains(out, " final#") || strings.Contains(out, `"kind":"final"`)
			}
			waitFor(t, 2*time.Minute, func() bool { return p.exited() || result() })
			if !p.exited() {
				p.signal(syscall.SIGTERM)
				if !p.wait(time.Minute) {
					t.Fatal("did not stop within a minute of SIGTERM")
				}
			}
			if p.err != nil || !result() {
				t.Fatalf("run ended with %v, results printed: %v", p.err, result())
			}
		})
	}
}
