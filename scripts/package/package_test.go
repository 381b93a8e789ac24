// Package pkgtest tests Eddy's Debian package and release tarball
// (package.sh, postinst, prerm, postrm): built from a fresh binary, installed
// into a throwaway root with dpkg, its files, user, unit and configuration
// template checked.
package pkgtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/checkpoint/checkpointtest"
)

// buildPackage builds eddy for this machine as dist/eddy-linux-amd64 in a
// temp dir and packages it; it returns the .deb's and the tarball's paths.
func buildPackage(t *testing.T) (deb, tarball string) {
	t.Helper()
	dist := t.TempDir()
	bin := filepath.Join(dist, "eddy-linux-amd64")
	build := exec.Command("go", "build", "-o", bin, "../..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build eddy: %v\n%s", err, out)
	}
	cmd := exec.Command("bash", "package.sh", dist, "eddy-linux-amd64")
	cmd.Env = append(os.Environ(), "EDDY_VERSION=1.2.3-4-gabcdef")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("package.sh: %v\n%s", err, out)
	}
	return filepath.Join(dist, "eddy_1.2.3+4+gabcdef_amd64.deb"),
		filepath.Join(dist, "eddy-1.2.3+4+gabcdef-linux-amd64.tar.gz")
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newRoot makes the least a dpkg --root install needs: an empty package
// database and the account files useradd edits. It holds no other package,
// so installs into it pass --force-depends (the package depends on passwd).
func newRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"var/lib/dpkg/status": "",
		"etc/passwd":          "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":           "root:x:0:\n",
		"etc/shadow":          "root:*:19000:0:99999:7:::\n",
		"etc/gshadow":         "root:*::\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestDeb_InstallsIntoRoot installs the amd64 package into a test root as
// dpkg does on a device (maintainer scripts included, through DPKG_ROOT) and
// checks the files, the conffile, the eddy user owning /var/lib/eddy, the
// unit, and that the installed template validates with the installed
// binary. Then purge removes the data directory and keeps the user.
func TestDeb_InstallsIntoRoot(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatal("dpkg is not installed; the Debian package cannot be tested")
	}
	if os.Geteuid() != 0 {
		t.Fatal("installing into a root needs root (CI runs as root)")
	}
	deb, _ := buildPackage(t)

	info := run(t, "dpkg-deb", "--field", deb, "Package", "Version", "Architecture")
	for _, want := range []string{"Package: eddy", "Version: 1.2.3+4+gabcdef", "Architecture: amd64"} {
		if !strings.Contains(info, want) {
			t.Errorf("control fields %q lack %q", info, want)
		}
	}
	if got := run(t, "dpkg-deb", "--info", deb, "conffiles"); strings.TrimSpace(got) != "/etc/eddy/eddy.hcl" {
		t.Errorf("conffiles = %q, want /etc/eddy/eddy.hcl", got)
	}

	root := newRoot(t)
	out := run(t, "dpkg", "--root="+root, "--force-script-chrootless", "--force-not-root", "--force-depends", "--log=/dev/null", "-i", deb)
	if !strings.Contains(out, "sudo systemctl enable --now eddy") {
		t.Errorf("postinst did not say how to start the service:\n%s", out)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{"usr/bin/eddy", 0o755},
		{"lib/systemd/system/eddy.service", 0o644},
		{"etc/eddy/eddy.hcl", 0o644},
		{"usr/share/doc/eddy/README.md", 0o644},
		{"var/lib/eddy", os.ModeDir | 0o750},
	} {
		fi, err := os.Stat(filepath.Join(root, tc.path))
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode()&(os.ModeDir|os.ModePerm) != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, fi.Mode(), tc.mode)
		}
	}

	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	var uid string
	for _, line := range strings.Split(string(passwd), "\n") {
		if f := strings.Split(line, ":"); len(f) == 7 && f[0] == "eddy" {
			uid = f[2]
			if f[5] != "/var/lib/eddy" || f[6] != "/usr/sbin/nologin" {
				t.Errorf("eddy user %q: want home /var/lib/eddy and no login shell", line)
			}
		}
	}
	if uid == "" {
		t.Fatalf("postinst created no eddy user:\n%s", passwd)
	}
	if owner := strings.TrimSpace(run(t, "stat", "-c", "%u", filepath.Join(root, "var/lib/eddy"))); owner != uid {
		t.Errorf("/var/lib/eddy is owned by uid %s, want eddy's %s", owner, uid)
	}

	unit, err := os.ReadFile(filepath.Join(root, "lib/systemd/system/eddy.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/bin/eddy run -c /etc/eddy/eddy.hcl", "User=eddy", "StateDirectory=eddy"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("unit lacks %q", want)
		}
	}
	// The template validates with the binary it came with.
	run(t, filepath.Join(root, "usr/bin/eddy"), "validate", "-c", filepath.Join(root, "etc/eddy/eddy.hcl"))
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		// verify checks that ExecStart's binary exists: point it into the root.
		check := filepath.Join(t.TempDir(), "eddy.service")
		fixed := strings.ReplaceAll(string(unit), "/usr/bin/eddy", filepath.Join(root, "usr/bin/eddy"))
		if err := os.WriteFile(check, []byte(fixed), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("systemd-analyze", "verify", check).CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze not installed: unit not verified")
	}

	// Data written by the agent goes with a purge; the user stays.
	if err := os.WriteFile(filepath.Join(root, "var/lib/eddy/state"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "dpkg", "--root="+root, "--force-script-chrootless", "--force-not-root", "--log=/dev/null", "--purge", "eddy")
	for _, gone := range []string{"usr/bin/eddy", "etc/eddy/eddy.hcl", "var/lib/eddy"} {
		if _, err := os.Stat(filepath.Join(root, gone)); err == nil {
			t.Errorf("%s is still there after purge", gone)
		}
	}
	if passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.Contains(string(passwd), "\neddy:") {
		t.Error("purge removed the eddy user")
	}
}

// TestTarball_InstallsWithTemplate unpacks the release tarball and runs its
// install.sh into a staging tree: the binary, the unit and the template (not
// the quickstart demo) land where the package puts them, under PREFIX.
func TestTarball_InstallsWithTemplate(t *testing.T) {
	_, tarball := buildPackage(t)
	dir := t.TempDir()
	run(t, "tar", "-C", dir, "-xzf", tarball)
	top := filepath.Join(dir, "eddy-1.2.3+4+gabcdef-linux-amd64")
	root := filepath.Join(dir, "root")
	cmd := exec.Command("bash", "scripts/install.sh", "--binary", "dist/eddy-linux-amd64")
	cmd.Dir = top
	cmd.Env = append(os.Environ(), "DESTDIR="+root, "PREFIX=/usr")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install.sh from the tarball: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(root, "etc/eddy/eddy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../examples/eddy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("install.sh installed another config than the template examples/eddy.hcl")
	}
	if strings.Contains(string(got), `source "simulator"`) {
		t.Error("the installed config runs the simulator")
	}
	for _, p := range []string{"usr/bin/eddy", "etc/systemd/system/eddy.service"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Error(err)
		}
	}
}

// stateConfig is a configuration whose data_dir and input lie in dir,
// %AGG% its aggregates: the test root's conffile as an operator edits it.
const stateConfig = `agent {
  device_id = "pkg"
  data_dir  = "%DIR%/data"
  admin     = ""
}
source "file" "in" {
  path = "%DIR%/in.jsonl"
  timestamp { field = "ts" }
}
sink "file" "out" { path = "%DIR%/out" }
pipeline "temp_10s" {
  from = source.file.in
  key  = event.sensor
  window "tumbling" { size = "10s" }
  aggregate {%AGG%
  }
  to = [sink.file.out]
}
`

// TestDeb_UpgradeValidatesState installs the package into a test root,
// lets its binary write checkpoints under the root's configuration, and
// installs the package again as an upgrade: postinst validates the
// configuration against that state with the new binary. With the
// configuration unchanged, or with an aggregate added (which rolls over),
// it restarts the service; when the checkpoint was written by a build that
// did not record pipeline definitions, the changed pipeline cannot roll
// over, and it says it would not restart the service, naming the change.
func TestDeb_UpgradeValidatesState(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatal("dpkg is not installed; the Debian package cannot be tested")
	}
	if os.Geteuid() != 0 {
		t.Fatal("installing into a root needs root (CI runs as root)")
	}
	deb, _ := buildPackage(t)
	root := newRoot(t)
	install := func() string {
		t.Helper()
		return run(t, "dpkg", "--root="+root, "--force-script-chrootless", "--force-not-root", "--force-depends", "--log=/dev/null", "-i", deb)
	}
	install()

	dir := t.TempDir()
	var in strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&in, "{\"sensor\":\"s%d\",\"ts\":%d,\"temp\":%d}\n", i%3, 1_700_000_000_000+int64(i)*100, 20+i%7)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, "etc/eddy/eddy.hcl")
	write := func(aggs string) {
		t.Helper()
		cfg := strings.NewReplacer("%DIR%", dir, "%AGG%", aggs).Replace(stateConfig)
		if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const before = "\n    n        = count()\n    avg_temp = avg(event.temp)"
	write(before)
	// The input ends, the run takes its final checkpoint and exits.
	run(t, filepath.Join(root, "usr/bin/eddy"), "run", "-c", conf)
	if m, _ := filepath.Glob(filepath.Join(dir, "data/checkpoints/manifests/*.json")); len(m) == 0 {
		t.Fatal("the run left no checkpoint")
	}

	if out := install(); strings.Contains(out, "would not start") {
		t.Errorf("upgrade over an unchanged configuration:\n%s", out)
	}
	write(before + "\n    max_temp = max(event.temp)")
	if out := install(); strings.Contains(out, "would not start") {
		t.Errorf("upgrade over a configuration that gained an aggregate, which rolls over:\n%s", out)
	}
	checkpointtest.StripExtra(t, filepath.Join(dir, "data"), "definition/")
	out := install()
	for _, want := range []string{"this version would not start on /etc/eddy/eddy.hcl",
		`pipeline "temp_10s": refuse to start: checkpoint `,
		`holds pipeline "temp_10s"'s state, and aggregates changed (max_temp added), which cannot roll over: the checkpoint was written by a build that does not record pipeline definitions`} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade over a configuration changed since a checkpoint of an earlier build does not say %q:\n%s", want, out)
		}
	}
}
