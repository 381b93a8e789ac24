package config

import (
	"path/filepath"
	"testing"
)

// TestLoad_Examples loads every configuration in examples/ (the quickstart,
// the reference, the packages' template and the cookbook) without a
// diagnostic, warnings included.
func TestLoad_Examples(t *testing.T) {
	paths, err := filepath.Glob("../examples/*.hcl")
	if err != nil || len(paths) < 3 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			l := Loader{Env: noEnv, DeviceID: fixedDeviceID}
			cfg, diags := l.Load(path)
			if len(diags) > 0 {
				t.Fatalf("Load(%s):\n%s", path, FormatDiagnostics(diags))
			}
			if len(cfg.Pipelines) == 0 {
				t.Fatalf("Load(%s): no pipelines", path)
			}
		})
	}
}
