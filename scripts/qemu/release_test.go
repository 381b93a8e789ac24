package qemu

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// distDir returns EDDY_DIST (the directory scripts/build.sh wrote; a
// relative path is taken from the repository root), or skips the test when
// it is unset; when set, every emulator must be installed.
func distDir(t *testing.T) string {
	t.Helper()
	dist := os.Getenv("EDDY_DIST")
	if dist == "" {
		t.Skip("EDDY_DIST is unset: run scripts/build.sh, then EDDY_DIST=dist go test ./scripts/qemu/ (scripts/test.sh does)")
	}
	if !filepath.IsAbs(dist) {
		// Relative to the repository root, where scripts/test.sh runs; go
		// test runs the test in this package's directory, two levels down.
		dist = filepath.Join("..", "..", dist)
	}
	dist, err := filepath.Abs(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range Targets {
		if err := target.Check(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dist, target.Name)); err != nil {
			t.Fatalf("release binary missing (run scripts/build.sh): %v", err)
		}
	}
	return dist
}

func TestRelease_Version(t *testing.T) {
	dist := distDir(t)
	for _, target := range Targets {
		t.Run(target.Name, func(t *testing.T) {
			out, err := target.Command(dist, "version").CombinedOutput()
			if err != nil {
				t.Fatalf("version: %v\n%s", err, out)
			}
			// "eddy <version> (commit <commit>) linux/<arch> go1.x"
			if f := strings.Fields(string(out)); len(f) != 6 || f[0] != "eddy" || f[4] != "linux/"+target.GOARCH || !strings.HasPrefix(f[5], "go1.") {
				t.Fatalf("version printed %q, want eddy VERSION (commit C) linux/%s go1.N", out, target.GOARCH)
			}
			t.Logf("%s", strings.TrimSpace(string(out)))
		})
	}
}

func TestRelease_ValidateExamples(t *testing.T) {
	dist := distDir(t)
	examples, err := filepath.Glob("../../examples/*.hcl")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example configs found (%v)", err)
	}
	for _, target := range Targets {
		for _, ex := range examples {
			t.Run(target.Name+"/"+filepath.Base(ex), func(t *testing.T) {
				out, err := target.Command(dist, "validate", "-c", ex).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "configuration is valid") {
					t.Fatalf("validate %s: %v\n%s", ex, err, out)
				}
			})
		}
	}
}

// The job's input: 120,000 readings of 1,000 devices, long enough that every
// binary completes a checkpoint well before the end (the native one runs it
// in about a third of a second, qemu-arm in about three).
var (
	inputOnce       sync.Once
	inputDir        string
	input           string
	referenceOutput []string
)

// reference returns the input file and the committed output of an
// uninterrupted run of the native binary, computed once per test binary.
func reference(t *testing.T, dist string) (string, []string) {
	t.Helper()
	inputOnce.Do(func() {
		dir, err := os.MkdirTemp("", "eddy-release-")
		if err != nil {
			t.Fatal(err)
		}
		inputDir, input = dir, filepath.Join(dir, "in.jsonl")
		writeReadings(t, input, 1000, 120)
		j := newJob(t, input)
		j.runToEnd(t, dist, AMD64)
		referenceOutput = j.committed(t)
	})
	if len(referenceOutput) < 12*1000 {
		t.Fatalf("the uninterrupted native run committed %d records, want ≥ 12,000", len(referenceOutput))
	}
	if n := len(byPipeline(t, referenceOutput)); n != 3 {
		t.Fatalf("the uninterrupted native run committed records of %d pipelines, want 3 (windows, per-key functions, report_by_exception)", n)
	}
	return input, referenceOutput
}

func TestMain(m *testing.M) {
	code := m.Run()
	if inputDir != "" {
		os.RemoveAll(inputDir)
	}
	os.Exit(code)
}

// TestRelease_CrashRestore runs the real job on each ARM binary under qemu,
// kills it with SIGKILL right after its first completed checkpoint,
// restarts it (restoring that checkpoint) and requires the committed output
// of an uninterrupted native run: no result lost, none doubled.
func TestRelease_CrashRestore(t *testing.T) {
	dist := distDir(t)
	in, want := reference(t, dist)
	for _, target := range []Target{ARM64, ARMv7} {
		t.Run(target.Name, func(t *testing.T) {
			j := newJob(t, in)
			j.runUntilCheckpoint(t, dist, target, syscall.SIGKILL)
			log := j.runToEnd(t, dist, target)
			requireRestored(t, log)
			requireSameOutput(t, j.committed(t), want)
		})
	}
}

// TestRelease_CrossArchRestore continues a job on another architecture from
// the data_dir the first one left: checkpoint files are portable (docs/architecture.md "File formats",
// Checkpoints), so 32-bit armv7 and 64-bit amd64 must restore each other's
// checkpoints and end with the uninterrupted run's output.
func TestRelease_CrossArchRestore(t *testing.T) {
	dist := distDir(t)
	in, want := reference(t, dist)
	for _, tc := range []struct {
		name     string
		from, to Target
		sig      syscall.Signal
	}{
		{"armv7 killed, amd64 restores", ARMv7, AMD64, syscall.SIGKILL},
		{"amd64 killed, armv7 restores", AMD64, ARMv7, syscall.SIGKILL},
		{"armv7 stopped by SIGTERM (final checkpoint), amd64 restores", ARMv7, AMD64, syscall.SIGTERM},
		{"arm64 killed, armv7 restores", ARM64, ARMv7, syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, in)
			j.runUntilCheckpoint(t, dist, tc.from, tc.sig)
			log := j.runToEnd(t, dist, tc.to)
			requireRestored(t, log)
			requireSameOutput(t, j.committed(t), want)
		})
	}
}

func requireRestored(t *testing.T, log string) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `msg="restored checkpoint"`) {
			t.Logf("%s", line)
			return
		}
	}
	t.Fatalf("the restart restored no checkpoint:\n%s", log)
}

// requireSameOutput compares each pipeline's committed records, in order,
// with the uninterrupted run's. The pipelines share one sink, and how their
// records interleave in it depends on timing, not on the restore.
func requireSameOutput(t *testing.T, got, want []string) {
	t.Helper()
	g, w := byPipeline(t, got), byPipeline(t, want)
	for _, name := range slices.Sorted(maps.Keys(w)) {
		requireSameRecords(t, name, g[name], w[name])
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("pipeline %s committed %d records, the uninterrupted native run none", name, len(g[name]))
		}
	}
}

// byPipeline splits records by their pipeline field, keeping their order.
func byPipeline(t *testing.T, records []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range records {
		var p struct{ Pipeline string }
		if err := json.Unmarshal([]byte(r), &p); err != nil {
			t.Fatalf("bad record %q: %v", r, err)
		}
		out[p.Pipeline] = append(out[p.Pipeline], r)
	}
	return out
}

func requireSameRecords(t *testing.T, pipeline string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("pipeline %s: committed output differs from the uninterrupted native run at record %d of %d (want %d):\n got %s\nwant %s",
				pipeline, i, len(got), len(want), got[i], want[i])
		}
	}
	t.Fatalf("pipeline %s: committed output has %d records, the uninterrupted native run %d", pipeline, len(got), len(want))
}

// TestTarget_Command pins how a foreign binary is started without
// binfmt_misc: the emulator, its CPU model, then the binary and its args.
func TestTarget_Command(t *testing.T) {
	for _, tc := range []struct {
		target Target
		want   []string
	}{
		{AMD64, []string{"/d/eddy-linux-amd64", "version"}},
		{ARM64, []string{"qemu-aarch64", "-cpu", "cortex-a53", "/d/eddy-linux-arm64", "version"}},
		{ARMv7, []string{"qemu-arm", "-cpu", "cortex-a7", "/d/eddy-linux-armv7", "version"}},
		{ARMv6, []string{"qemu-arm", "-cpu", "arm1176", "/d/eddy-linux-armv6", "version"}},
	} {
		cmd := tc.target.Command("/d", "version")
		if !slices.Equal(cmd.Args, tc.want) {
			t.Errorf("%s: args %q, want %q", tc.target, cmd.Args, tc.want)
		}
	}
}
