package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestQuickstart_ShowsEventTime runs examples/quickstart.hcl as shipped (only
// its data_dir and ports moved into the test's own) and requires what it is
// there to show within its first 30 seconds: windows closed by the
// watermark (`final`) and windows re-fired by late readings (`late_update`).
func TestQuickstart_ShowsEventTime(t *testing.T) {
	data, err := os.ReadFile("examples/quickstart.hcl")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := string(data)
	for _, r := range []string{`data_dir = "./eddy-data"`, `listen = "127.0.0.1:18830"`} {
		if !strings.Contains(tmpl, r) {
			t.Fatalf("examples/quickstart.hcl no longer has %s: update this test", r)
		}
	}
	tmpl = replaceAll(tmpl,
		`data_dir = "./eddy-data"`, `data_dir = "%DATA%"`+"\n  admin = \"127.0.0.1:0\"",
		`listen = "127.0.0.1:18830"`, `listen = "127.0.0.1:0"`)
	p := startEddy(t, "run", "-c", writeConfig(t, t.TempDir(), tmpl))
	start := time.Now()
	for _, kind := range []string{" final#", " late_update#"} {
		if !p.waitLog(kind, 30*time.Second-time.Since(start)) {
			t.Fatalf("no %q line in the quickstart's first 30 s", strings.TrimSpace(kind))
		}
	}
	t.Logf("final and late_update lines within %v", time.Since(start).Round(time.Second))
}
