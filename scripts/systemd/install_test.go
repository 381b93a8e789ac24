// Package systemd holds Eddy's systemd unit (eddy.service) and tests it
// together with scripts/install.sh, installed into a temp dir (DESTDIR).
package systemd

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint/checkpointtest"
)

// unitDirectives returns the unit's directives as section → key → values.
func unitDirectives(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	units := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			units[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: bad line %q", path, line)
			}
			units[section][k] = append(units[section][k], v)
		}
	}
	return units
}

// TestUnit_Directives pins what the unit promises: restarts bounded by a
// start limit, a system user owning only its state directory, a read-only
// system, SIGTERM with time for the final checkpoint.
func TestUnit_Directives(t *testing.T) {
	u := unitDirectives(t, "eddy.service")
	for _, tc := range []struct{ section, key, want string }{
		{"Unit", "StartLimitIntervalSec", "600"},
		{"Unit", "StartLimitBurst", "5"},
		{"Service", "ExecStartPre", "/usr/bin/eddy validate --no-state -c /etc/eddy/eddy.hcl"},
		{"Service", "ExecStart", "/usr/bin/eddy run -c /etc/eddy/eddy.hcl"},
		{"Service", "Restart", "on-failure"},
		{"Service", "RestartSec", "5s"},
		{"Service", "KillSignal", "SIGTERM"},
		{"Service", "KillMode", "mixed"},
		{"Service", "User", "eddy"},
		{"Service", "Group", "eddy"},
		{"Service", "StateDirectory", "eddy"},
		{"Service", "StateDirectoryMode", "0750"},
		{"Service", "ProtectSystem", "strict"},
		{"Service", "PrivateTmp", "yes"},
		{"Service", "NoNewPrivileges", "yes"},
		{"Service", "CapabilityBoundingSet", ""},
		{"Install", "WantedBy", "multi-user.target"},
	} {
		got := u[tc.section][tc.key]
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("[%s] %s = %q, want exactly %q", tc.section, tc.key, got, tc.want)
		}
	}
	// A reload validates the configuration against the state before the
	// agent gets SIGHUP: systemd runs ExecReload lines in order and stops
	// at the first that fails.
	if got := u["Service"]["ExecReload"]; len(got) != 2 || got[0] != "/usr/bin/eddy validate -c /etc/eddy/eddy.hcl" || got[1] != "/bin/kill -HUP $MAINPID" {
		t.Errorf("ExecReload = %q, want validate, then SIGHUP to the main process", got)
	}
	// The final checkpoint of a large state on a slow SD card takes time.
	if d, err := time.ParseDuration(strings.Join(u["Service"]["TimeoutStopSec"], "")); err != nil || d < time.Minute {
		t.Errorf("TimeoutStopSec = %q, want at least 1m", u["Service"]["TimeoutStopSec"])
	}
}

// TestInstall_DESTDIR runs scripts/install.sh into a temp tree with another
// prefix, twice: the first run places binary, config and unit (and
// systemd-analyze verify passes when it is installed), the second keeps the
// config an operator may have edited.
func TestInstall_DESTDIR(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "eddy")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("build eddy: %v\n%s", err, out)
	}
	root := filepath.Join(tmp, "root")
	install := func() string {
		t.Helper()
		cmd := exec.Command("bash", "../install.sh", "--binary", bin)
		cmd.Env = append(os.Environ(), "DESTDIR="+root, "PREFIX=/opt/eddy")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	out := install()
	if _, err := exec.LookPath("systemd-analyze"); err == nil && !strings.Contains(out, "systemd-analyze verify passed") {
		t.Errorf("systemd-analyze is installed but the unit was not verified:\n%s", out)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{"opt/eddy/bin/eddy", 0o755},
		{"etc/eddy/eddy.hcl", 0o644},
		{"etc/systemd/system/eddy.service", 0o644},
	} {
		fi, err := os.Stat(filepath.Join(root, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tc.mode {
			t.Errorf("%s: mode %04o, want %04o", tc.path, fi.Mode().Perm(), tc.mode)
		}
	}
	u := unitDirectives(t, filepath.Join(root, "etc/systemd/system/eddy.service"))
	if got := u["Service"]["ExecStart"]; len(got) != 1 || got[0] != "/opt/eddy/bin/eddy run -c /etc/eddy/eddy.hcl" {
		t.Errorf("installed ExecStart = %q, want the binary under PREFIX", got)
	}
	conf, err := os.ReadFile(filepath.Join(root, "etc/eddy/eddy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), `data_dir = "/var/lib/eddy"`) {
		t.Errorf("installed config does not put data_dir in the unit's StateDirectory:\n%s", conf)
	}

	edited := append(conf, []byte("# edited by the operator\n")...)
	if err := os.WriteFile(filepath.Join(root, "etc/eddy/eddy.hcl"), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := install(); !strings.Contains(out, "kept") {
		t.Errorf("second install did not say it kept the config:\n%s", out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc/eddy/eddy.hcl")); string(got) != string(edited) {
		t.Error("second install overwrote the operator's config")
	}
	if _, err := os.Stat(filepath.Join(root, "etc/eddy/eddy.hcl.new")); err != nil {
		t.Errorf("second install did not leave the new config beside it: %v", err)
	}
}

// TestInstall_RejectsBadConfig: a config that does not validate stops the
// install before anything refers to it.
func TestInstall_RejectsBadConfig(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "eddy")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("build eddy: %v\n%s", err, out)
	}
	bad := filepath.Join(tmp, "bad.hcl")
	if err := os.WriteFile(bad, []byte("agent {\n  admni = \"x\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "../install.sh", "--binary", bin, "--config", bad)
	cmd.Env = append(os.Environ(), "DESTDIR="+filepath.Join(tmp, "root"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not validate") {
		t.Fatalf("install.sh with a bad config: err %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "root/etc/systemd/system/eddy.service")); err == nil {
		t.Error("the unit was installed for a config that does not validate")
	}
}

// TestInstall_RefusesBinaryThatWouldNotStart: over an existing
// configuration whose data_dir holds checkpoints, install.sh validates it
// against that state with the new binary first, and installs nothing when
// run would refuse to start there (the configuration changed a pipeline's
// aggregates since a checkpoint of a build that did not record pipeline
// definitions, so the change cannot roll over); with the configuration the
// state was written with, it installs.
func TestInstall_RefusesBinaryThatWouldNotStart(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "eddy")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("build eddy: %v\n%s", err, out)
	}
	var in strings.Builder
	for i := 0; i < 300; i++ {
		in.WriteString(`{"sensor":"s` + strconv.Itoa(i%3) + `","ts":` + strconv.Itoa(1_700_000_000_000+i*100) + `,"temp":21}` + "\n")
	}
	if err := os.WriteFile(filepath.Join(tmp, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(tmp, "root")
	conf := filepath.Join(root, "etc/eddy/eddy.hcl")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(aggs string) {
		t.Helper()
		cfg := `agent {
  data_dir = "` + tmp + `/data"
  admin    = ""
}
source "file" "in" {
  path = "` + tmp + `/in.jsonl"
  timestamp { field = "ts" }
}
sink "file" "out" { path = "` + tmp + `/out" }
pipeline "temp_10s" {
  from = source.file.in
  key  = event.sensor
  window "tumbling" { size = "10s" }
  aggregate {` + aggs + `
  }
  to = [sink.file.out]
}
`
		if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const written = "\n    n = count()"
	write(written)
	if out, err := exec.Command(bin, "run", "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("eddy run: %v\n%s", err, out)
	}
	install := func() (string, error) {
		cmd := exec.Command("bash", "../install.sh", "--binary", bin)
		cmd.Env = append(os.Environ(), "DESTDIR="+root, "PREFIX=/opt/eddy")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	write(written + "\n    max_temp = max(event.temp)")
	checkpointtest.StripExtra(t, filepath.Join(tmp, "data"), "definition/")
	out, err := install()
	if err == nil || !strings.Contains(out, "would not start on "+conf) ||
		!strings.Contains(out, `pipeline "temp_10s": refuse to start: checkpoint `) ||
		!strings.Contains(out, `aggregates changed (max_temp added), which cannot roll over: the checkpoint was written by a build that does not record pipeline definitions`) {
		t.Fatalf("install.sh over a configuration run would refuse: err %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/eddy/bin/eddy")); err == nil {
		t.Error("the binary was installed although it would not start")
	}

	write(written)
	if out, err := install(); err != nil {
		t.Fatalf("install.sh over the configuration the state was written with: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/eddy/bin/eddy")); err != nil {
		t.Error(err)
	}
}
