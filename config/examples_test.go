package config

import (
	"testing"
)

func TestLoad_Examples(t *testing.T) {
	for _, path := range []string{"../examples/quickstart.hcl", "../examples/full.hcl"} {
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
