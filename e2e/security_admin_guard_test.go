package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/scripts/loopback"
)

const guardedAdminConfig = `
agent {
  device_id = "guarded"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices = 2
  rate    = 50
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to = [sink.file.out]
}
checkpoint {
  interval       = "1s"
  max_savepoints = 1
}
`

// TestAdmin_GuardAndSavepointLimit runs the real binary: a request with a
// foreign Host and a cross-origin POST are refused with 403 before
// anything happens; `eddy savepoint` takes one savepoint, the second is
// refused naming max_savepoints, and after `eddy savepoint rm` one can be
// taken again.
func TestAdmin_GuardAndSavepointLimit(t *testing.T) {
	dir := t.TempDir()
	p := startAgent(t, dir, guardedAdminConfig, "%BROKER%", loopback.Addr(t))
	cfg := dir + "/agent.hcl"

	post := func(mod func(*http.Request)) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+p.admin+"/api/savepoint", nil)
		if err != nil {
			t.Fatal(err)
		}
		mod(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(func(r *http.Request) { r.Host = "rebind.attacker.test" }); code != http.StatusForbidden {
		t.Fatalf("POST with a foreign Host = %d, want 403", code)
	}
	if code := post(func(r *http.Request) {
		r.Header.Set("Origin", "http://attacker.test")
		r.Header.Set("Sec-Fetch-Site", "cross-site")
	}); code != http.StatusForbidden {
		t.Fatalf("cross-site POST = %d, want 403", code)
	}

	out, err := runEddy(t, "savepoint", "-c", cfg)
	m := regexp.MustCompile(`savepoint (\d+) taken`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("first savepoint: %v: %s", err, out)
	}
	out, err = runEddy(t, "savepoint", "-c", cfg)
	if err == nil || !strings.Contains(out, "max_savepoints = 1") || !strings.Contains(out, "eddy savepoint rm") {
		t.Fatalf("second savepoint: %v: %s; want it refused naming max_savepoints and savepoint rm", err, out)
	}
	if out, err = runEddy(t, "savepoint", "rm", "-c", cfg, m[1]); err != nil || !strings.Contains(out, "savepoint "+m[1]+" removed") {
		t.Fatalf("savepoint rm %s: %v: %s", m[1], err, out)
	}
	if out, err = runEddy(t, "savepoint", "-c", cfg); err != nil {
		t.Fatalf("savepoint after rm: %v: %s", err, out)
	}
}
