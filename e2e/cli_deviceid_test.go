package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/config"
)

const deviceIDConfig = `
agent {
  %DEVICE%
  data_dir = "%DATA%"
  admin    = ""
}
source "file" "in" { path = "%DIR%/in.jsonl" }
sink "stdout" "out" {}
pipeline "p" {
  from = source.file.in
  to   = [sink.stdout.out]
}
`

// TestDeviceID_KeptByDataDir runs the real binary: the first start records
// the device id in data_dir; a start with another device_id is refused,
// naming --allow-new-device-id, which then lets it start.
func TestDeviceID_KeptByDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"v":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, deviceIDConfig, "%DEVICE%", `device_id = "first"`)
	if out, err := runEddy(t, "run", "-c", cfg); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	writeConfig(t, dir, deviceIDConfig, "%DEVICE%", `device_id = "second"`)
	out, err := runEddy(t, "run", "-c", cfg)
	if err == nil || !strings.Contains(out, `device "first"`) || !strings.Contains(out, "--allow-new-device-id") {
		t.Fatalf("run with a changed device id: %v\n%s\nwant it refused", err, out)
	}
	if out, err := runEddy(t, "run", "--allow-new-device-id", "-c", cfg); err != nil {
		t.Fatalf("run with --allow-new-device-id: %v\n%s", err, out)
	}
	if out, err := runEddy(t, "id", "-c", cfg); err != nil || strings.TrimSpace(out) != "second" {
		t.Fatalf("eddy id -c: %q, %v", out, err)
	}
}

// TestDeviceID_DefaultDerived: with no device_id, a fresh data_dir gets
// the id derived from the machine id (eddy id prints it, and it is not the
// machine id).
func TestDeviceID_DefaultDerived(t *testing.T) {
	b, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		t.Skip("needs /etc/machine-id (without it the default is the host name)")
	}
	raw := strings.TrimSpace(string(b))
	derived, err := config.MachineDeviceID()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runEddy(t, "id"); err != nil || strings.TrimSpace(out) != derived || derived == raw {
		t.Fatalf("eddy id = %q, %v; want the derived %s, not the machine id", out, err, derived)
	}
	fresh := t.TempDir()
	cfg := writeConfig(t, fresh, deviceIDConfig, "%DEVICE%", "")
	if out, err := runEddy(t, "id", "-c", cfg); err != nil || strings.TrimSpace(out) != derived {
		t.Fatalf("fresh data_dir: eddy id -c = %q, %v; want %s", out, err, derived)
	}
}
