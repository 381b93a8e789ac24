package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// earlierCommit is the build the upgrade test starts from: main just
// before validate learnt to read the state. It writes every file format at
// the version this build reads (ingest log 3, snapshot 2, manifest 2, WAL
// 5), and records each pipeline's state shape without the filter and map
// this build adds to it, which this build must still restore rather than
// take for a change. Move it forward when a format's version is raised:
// until the first release a build reads only its own versions.
const earlierCommit = "7ace5b06d067fe36d2e9d0995a7ce13de06561d5"

// buildAt builds the eddy binary of commit, checked out in a git worktree
// in a temporary directory (removed again), and returns its path.
func buildAt(t *testing.T, commit string) string {
	t.Helper()
	if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("commit %s is not in this clone (a shallow one? fetch its history): %v\n%s", commit, err, out)
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if out, err := exec.Command("git", "worktree", "add", "--detach", src, commit).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("git", "worktree", "remove", "--force", src).CombinedOutput(); err != nil {
			t.Logf("git worktree remove: %v\n%s", err, out)
		}
	})
	bin := filepath.Join(tmp, "eddy-"+commit[:12])
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", commit[:12], err, out)
	}
	return bin
}

// TestCheckpoint_UpgradeFromEarlierBuild: the build of earlierCommit reads
// readings from mosquitto into its ingest log, checkpoints and publishes
// results upstream through the WAL sink; halfway through the input it is
// SIGKILLed, and this build starts on the same data_dir and configuration.
// validate first says it restores the earlier build's checkpoint; then
// run restores it, replays the earlier build's ingest log and delivers
// what its WAL holds, and the results upstream equal an uninterrupted
// run's of this build exactly: every window, each once.
func TestCheckpoint_UpgradeFromEarlierBuild(t *testing.T) {
	t.Parallel()
	old := buildAt(t, earlierCommit)
	readings, devices, _ := crashScale()
	in := mosquitto.Start(t)
	up := mosquittoUpstream{mosquitto.Start(t)}
	col := newCollector(t, up.URL(), "results/#")
	run := func(device string) *mqttCrashRun {
		return newCrashRun(t, walCrashConfig, "%DEVICE%", device, "%BROKER%", in.URL(), "%UPSTREAM%", up.URL())
	}
	windows := len(expectedWindows(readings, devices))
	settle := func(device string) map[string]string {
		await.True(t, 3*time.Minute, `col.windowCount(device) >= windows`, func() bool { return col.windowCount(device) >= windows })
		return col.windows(device)
	}

	clean := run("clean")
	clean.start()
	publishReadings(t, in.URL(), "pub-clean", readings, devices, func(int) {})
	want := settle("clean")
	clean.stop()

	upgraded := run("upgraded")
	upgraded.bin = old
	upgraded.start()
	half := readings / 2 / 1000 * 1000
	publishReadings(t, in.URL(), "pub-upgraded", readings, devices, func(i int) {
		if i != half {
			return
		}
		// The earlier build has logged readings, completed a checkpoint
		// and sent results through its WAL.
		await.True(t, time.Minute, `checkpoint completed and results upstream`, func() bool {
			return upgraded.p.logContains("checkpoint completed") && col.windowCount("upgraded") > 0
		})
		upgraded.kill()
		data := filepath.Join(upgraded.dir, "data")
		for _, dir := range []string{"ingest/sensors", "wal/cloud", "checkpoints/manifests"} {
			if names, _ := os.ReadDir(filepath.Join(data, dir)); len(names) == 0 {
				t.Errorf("the earlier build left nothing in %s", dir)
			}
		}
		out, err := exec.Command(eddyBin, "validate", "-c", upgraded.cfg).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "\n  pipeline \"sums\": restore\n") {
			t.Errorf("validate over the earlier build's state: %v\n%s", err, out)
		}
		upgraded.bin = ""
		upgraded.start()
		if !upgraded.p.waitLog("restored checkpoint", 30*time.Second) {
			t.Error("this build did not restore the earlier build's checkpoint")
		}
	})
	got := settle("upgraded")
	upgraded.stop()

	col.mu.Lock()
	dups := col.duplicates
	col.mu.Unlock()
	if len(dups) > 0 {
		t.Errorf("%d results delivered twice, e.g. %v", len(dups), dups[:min(5, len(dups))])
	}
	if len(want) != windows {
		t.Errorf("the uninterrupted run delivered %d windows, want %d", len(want), windows)
	}
	sameWindows(t, want, got, 1)
}
