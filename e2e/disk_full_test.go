//go:build linux

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/tmpfs"
)

// uninterruptedRecords writes the crash test's readings to dir/in.jsonl and
// returns the committed output of an uninterrupted run on them (in a
// directory of its own).
func uninterruptedRecords(t *testing.T, dir string) []string {
	t.Helper()
	input := filepath.Join(dir, "in.jsonl")
	writeReadings(t, input, 1000, 1200, 31)
	clean := t.TempDir()
	os.Link(input, filepath.Join(clean, "in.jsonl"))
	runToEnd(t, clean)
	return committedRecords(t, filepath.Join(clean, "out"))
}

// waitFinished waits up to 3 minutes for ag, whose disk has room again, to
// finish its job, and fails the test unless it exits cleanly.
func waitFinished(t *testing.T, ag *eddyProc) {
	t.Helper()
	if !ag.wait(3 * time.Minute) {
		t.Fatal("the job did not finish within 3 minutes of the disk having room again")
	}
	if ag.err != nil {
		t.Fatalf("eddy run exited with %v", ag.err)
	}
}

// sameRecords fails the test unless the output after the full disk, got,
// equals the uninterrupted run's, want.
func sameRecords(t *testing.T, want, got []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("output after the full disk differs from the uninterrupted run: %d records vs %d", len(got), len(want))
	}
}

// TestDiskFull_CheckpointsWaitForSpace puts the checkpoint store on a small
// file system (a tmpfs the test mounts) with almost no room left, and runs
// the crash test's job with tolerable_failures = 0: the checkpoints fail
// with ENOSPC, yet the agent stays up, /readyz says disk_full and is not
// ready, and no failure is counted; once space is freed the checkpoints
// resume by themselves, and the committed output equals the uninterrupted
// run's, with no file left that no checkpoint references.
func TestDiskFull_CheckpointsWaitForSpace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "data", "checkpoints")
	tmpfs.Mount(t, store, "256m")
	filler := tmpfs.Fill(t, store, 32<<10)

	want := uninterruptedRecords(t, dir)

	tmpl := replaceAll(crashConfig, `admin       = ""`, `admin       = "%ADMIN%"`,
		`  interval = "100ms"`, "  interval = \"100ms\"\n  tolerable_failures = 0")
	ag := startAgent(t, dir, tmpl)
	waitDiskFull(t, ag, store)
	if !ag.waitLog("disk full: checkpoints wait until space frees", 10*time.Second) {
		t.Error("no log line about the full disk")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !ag.waitLog("disk has room again: checkpoints resume", 30*time.Second) {
		t.Fatal("checkpoints did not resume after space was freed")
	}
	waitFinished(t, ag)
	aborted := strings.Count(ag.output(), "disk_full=true")
	t.Logf("%d checkpoints aborted while the disk was full", aborted)
	if aborted == 0 {
		t.Error("no checkpoint was aborted for the full disk: the test filled nothing")
	}
	if ag.logContains("too many") {
		t.Error("a checkpoint that failed for lack of space counted towards tolerable_failures")
	}
	sameRecords(t, want, committedRecords(t, filepath.Join(dir, "out")))
	checkNoOrphanFiles(t, store)
}

// waitDiskFull waits until /readyz's disk check fails with disk_full and a
// path under want, failing the test if the agent exits first or it takes
// longer than a minute; it returns the check's detail.
func waitDiskFull(t *testing.T, ag *eddyProc, want string) string {
	t.Helper()
	var detail string
	if !await.Holds(60*time.Second, func() bool {
		code, ok, d := readyzCheck(ag.admin, "disk")
		detail = d
		return ag.exited() || (code == http.StatusServiceUnavailable && !ok && strings.Contains(d, "disk_full") && strings.Contains(d, want))
	}) || ag.exited() {
		t.Fatalf("/readyz never said disk_full under %s (agent exited: %v; last detail %q)", want, ag.exited(), detail)
	}
	if !strings.Contains(detail, "no space left on device") {
		t.Errorf("/readyz disk check %q does not say why", detail)
	}
	return detail
}

// fullDiskConfig is crashConfig with data_dir and the exactly-once file
// sink's output on the file system at %DIR%/fs, and an admin endpoint.
var fullDiskConfig = replaceAll(crashConfig, `admin       = ""`, `admin       = "%ADMIN%"`,
	`data_dir    = "%DATA%"`, `data_dir    = "%DIR%/fs/data"`, `path     = "%DIR%/out"`, `path     = "%DIR%/fs/out"`)

// TestDiskFull_PipelineWritesWaitForSpace runs the crash test's job with
// data_dir and the exactly-once file sink's output on a small file system
// (a tmpfs the test mounts) with little room left: whatever writes when the
// room runs out (the state's working file, the sink's part files, the
// checkpoints) meets ENOSPC, and at least one pipeline write does. The agent
// never exits; /readyz says disk_full with a path on that file system; the
// pipelines wait for space without counting restarts; once space is freed
// the job finishes by itself and the committed output equals the
// uninterrupted run's.
func TestDiskFull_PipelineWritesWaitForSpace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fsDir := filepath.Join(dir, "fs")
	tmpfs.Mount(t, fsDir, "256m")
	ag := pipelinesWaitOutFullDisk(t, dir, fsDir, 256<<10, fullDiskConfig, fsDir, filepath.Join(fsDir, "out"))
	if ag.logContains("restart strategy gives up") {
		t.Error("a full disk counted towards the restart strategy")
	}
}

// pipelinesWaitOutFullDisk runs the crash test's job with cfg, its files in
// dir, after filling the file system at fsDir (a tmpfs the caller mounted)
// to less than leave bytes free: /readyz must say disk_full under want and
// the pipelines wait for space; once space is freed the job must finish by
// itself with the uninterrupted run's output in out. It returns the
// agent, for the caller's checks of its log.
func pipelinesWaitOutFullDisk(t *testing.T, dir, fsDir string, leave int64, cfg, want, out string) *eddyProc {
	t.Helper()
	records := uninterruptedRecords(t, dir)
	filler := tmpfs.Fill(t, fsDir, leave)
	ag := startAgent(t, dir, cfg)
	detail := waitDiskFull(t, ag, want)
	t.Logf("/readyz disk: %s", detail)
	if !ag.waitLog("disk full: pipelines wait until space frees", 60*time.Second) {
		t.Fatal("no pipeline write (sink or state) met the full disk")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, ag)
	sameRecords(t, records, committedRecords(t, out))
	return ag
}

// TestDiskFull_IngestHoldsReadingsUnacked: sensors publish at QoS 1 into
// the embedded broker of an agent whose data_dir is on a small file system
// (a tmpfs the test mounts) with little room left. The ingest log cannot
// take them: the agent stays up, /readyz says disk_full with a path in
// data_dir, and the readings stay unacknowledged (the sensor is still
// waiting); once space is freed they are logged and acknowledged, and every
// window's result equals the uninterrupted result.
func TestDiskFull_IngestHoldsReadingsUnacked(t *testing.T) {
	t.Parallel()
	const readings, devices = 20_000, 1000
	want := expectedWindows(readings, devices)
	addr := loopback.Addr(t)
	r := newEmbeddedCrashRun(t, addr)
	data := filepath.Join(r.dir, "data")
	tmpfs.Mount(t, data, "256m")
	r.start()
	filler := tmpfs.Fill(t, data, 8<<10) // the agent has started: its files exist

	published := make(chan struct{})
	var sensor *reconnectingSensor
	var pubErr error
	go func() {
		defer close(published)
		sensor, pubErr = sendReadingsReconnecting("tcp://"+addr, "pub-full", readings, devices)
	}()
	detail := waitDiskFull(t, r.p, filepath.Join(data, "ingest", "sensors"))
	t.Logf("/readyz disk: %s", detail)
	// /readyz may report the shortage a moment before its log line is written.
	if !r.p.waitLog("disk full: ingest holds messages unacked at the broker until space frees", 30*time.Second) {
		t.Error("no log line says ingest holds the readings")
	}
	select {
	case <-published:
		t.Fatalf("every reading was acknowledged with the disk full (publisher: %v)", pubErr)
	default:
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	<-published
	if pubErr != nil {
		t.Fatalf("publisher: %v", pubErr)
	}
	defer sensor.close()
	if r.p.exited() {
		t.Fatalf("the agent exited: %v", r.p.err)
	}
	got := r.finalResults(len(want))
	sameWindows(t, want, got, 0)
}

// TestDiskFull_StateRebuildWaitsForSpace kills the crash test's job after a
// few checkpoints, fills the file system of its data_dir (a tmpfs the test
// mounts) and starts it again. Keeping a whole copy of the state in the
// working file (read_checkpoints = false), rebuilding it from the
// checkpoint meets ENOSPC, yet the agent stays up, its admin endpoint
// answers and /readyz says disk_full with the state directory; once space
// is freed the rebuild is retried by itself. Reading the checkpoint files
// where they are (the default), the restore writes nothing and succeeds on
// the full disk. Either way the job finishes once space is freed, and the
// committed output equals the uninterrupted run's.
func TestDiskFull_StateRebuildWaitsForSpace(t *testing.T) {
	for _, copied := range []bool{true, false} {
		t.Run(map[bool]string{true: "whole copy", false: "read in place"}[copied], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fsDir := filepath.Join(dir, "fs")
			tmpfs.Mount(t, fsDir, "256m")
			want := uninterruptedRecords(t, dir)
			cfg := fullDiskConfig
			if copied {
				cfg += "state { read_checkpoints = false }\n"
			}

			first := startAgent(t, dir, cfg)
			if !first.waitLog(`msg="checkpoint completed" id=3 `, 60*time.Second) {
				t.Fatal("no third checkpoint to restore")
			}
			first.kill()

			filler := tmpfs.Fill(t, fsDir, 64<<10)
			ag := startAgent(t, dir, cfg)
			if copied {
				detail := waitDiskFull(t, ag, filepath.Join(fsDir, "data", "state"))
				t.Logf("/readyz disk: %s", detail)
				if !ag.waitLog("disk full: the state rebuild waits until space frees", 30*time.Second) {
					t.Error("no log line says the state rebuild waits")
				}
			} else if !ag.waitLog(`msg="restored checkpoint"`, 30*time.Second) {
				t.Fatal("the restore did not succeed on the full disk")
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if copied && !ag.waitLog("disk has room again: state rebuilt", 30*time.Second) {
				t.Fatal("the state rebuild was not retried after space was freed")
			}
			waitFinished(t, ag)
			if !copied && ag.logContains("the state rebuild waits") {
				t.Error("reading the checkpoint files in place, the restore waited for space")
			}
			sameRecords(t, want, committedRecords(t, filepath.Join(fsDir, "out")))
		})
	}
}

// TestDiskFull_StopSaysWhichCheckpointRestores stops the agent with SIGTERM
// while its checkpoint store's disk (a tmpfs the test mounts) is full: it
// exits cleanly, without trying a final checkpoint, saying in one line which
// checkpoint the next start restores; that start, with space again,
// finishes the job with the uninterrupted run's output.
func TestDiskFull_StopSaysWhichCheckpointRestores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "data", "checkpoints")
	tmpfs.Mount(t, store, "256m")
	want := uninterruptedRecords(t, dir)

	// Slowed, so the job is still running when the filler (256 MiB in
	// 64 KiB writes, seconds under -race on a busy machine) is done.
	tmpl := slow(replaceAll(crashConfig, `admin       = ""`, `admin       = "%ADMIN%"`))
	ag := startAgent(t, dir, tmpl)
	if !ag.waitLog(`msg="checkpoint completed" id=2 `, 60*time.Second) {
		t.Fatal("no second checkpoint")
	}
	filler := tmpfs.Fill(t, store, 32<<10)
	waitDiskFull(t, ag, store)
	ag.signal(syscall.SIGTERM)
	if !ag.wait(60 * time.Second) {
		t.Fatal("the agent did not stop within 60 s of SIGTERM")
	}
	if ag.err != nil {
		t.Fatalf("eddy run exited with %v", ag.err)
	}
	if !ag.logContains("stopping with the disk full: no final checkpoint; the next start restores checkpoint ") {
		t.Fatal("no line says which checkpoint the next start restores")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	runToEndWith(t, dir, replaceAll(tmpl, "%ADMIN%", loopback.Addr(t)))
	sameRecords(t, want, committedRecords(t, filepath.Join(dir, "out")))
}

// sinkOwnFSConfig is crashConfig with the exactly-once file sink's output
// on the file system at %DIR%/sinkfs, data_dir where it is (on the test
// machine's disk), and an admin endpoint.
var sinkOwnFSConfig = replaceAll(crashConfig, `admin       = ""`, `admin       = "%ADMIN%"`,
	`path     = "%DIR%/out"`, `path     = "%DIR%/sinkfs/out"`)

// TestDiskFull_SinkOnItsOwnFileSystemWaits runs the crash test's job with
// the exactly-once file sink's output on a small file system of its own (a
// tmpfs the test mounts) with little room left, and data_dir on a disk with
// plenty: the sink's part meets ENOSPC. The pipelines wait for space on the
// sink's file system (not data_dir's, which has room), counting no restart;
// /readyz says disk_full with a path on that file system (under the
// pipelines, or under the checkpoints when a barrier's pre-commit of the
// sink met the full disk first: which comes first is timing); the agent
// never exits, and once space is freed there the job
// finishes by itself with the uninterrupted run's output.
func TestDiskFull_SinkOnItsOwnFileSystemWaits(t *testing.T) {
	dir := t.TempDir()
	sinkFS := filepath.Join(dir, "sinkfs")
	tmpfs.Mount(t, sinkFS, "256m")
	ag := pipelinesWaitOutFullDisk(t, dir, sinkFS, 64<<10, sinkOwnFSConfig, ": "+sinkFS, filepath.Join(sinkFS, "out"))
	if s := ag.output(); strings.Contains(s, "pipelines failed: restarting") || strings.Contains(s, "restart strategy gives up") {
		t.Error("the sink's full file system counted towards the restart strategy")
	}
}
