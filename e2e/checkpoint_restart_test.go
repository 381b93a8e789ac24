package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// TestRestart_SinkFailureRestartsFromCheckpoint: the exactly-once sink's
// directory disappears under a running agent, so its writes fail; the run
// stops, the restart strategy waits and restarts the pipelines from the
// last checkpoint, and the job completes.
func TestRestart_SinkFailureRestartsFromCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	writeReadings(t, input, 1000, 400, 3)
	// Slowed down (~4 s of input) so that the job is still running when the
	// sink's directory goes.
	path := writeConfig(t, dir, crashConfig+`
restart {
  strategy = "fixed_delay"
  attempts = 3
  delay    = "200ms"
}
`, "  to = [sink.file.out]\n}", "  to = [sink.file.out]\n  debug_delay_per_record = \"20us\"\n}")
	p := startEddy(t, "run", "-c", path)
	await.True(t, 20*time.Second, `p.logContains("checkpoint completed")`, func() bool { return p.logContains("checkpoint completed") })
	// Replace the sink's directory by a file: every part file write fails.
	out := filepath.Join(dir, "out")
	os.RemoveAll(out)
	os.WriteFile(out, []byte("not a directory"), 0o644)
	await.True(t, 20*time.Second, `p.logContains("restarting from the last checkpoint")`, func() bool { return p.logContains("restarting from the last checkpoint") })
	os.Remove(out) // the disk is fine again
	if !p.wait(60 * time.Second) {
		t.Fatal("the job did not finish after the restart")
	}
	if p.err != nil {
		t.Fatalf("agent exited with %v after the restart", p.err)
	}
	if n := len(committedRecords(t, out)); n == 0 {
		t.Fatal("no committed output after the restart")
	}
}

// TestRestart_GivesUp: a failure that persists (a state store too small for
// the job) restarts as often as the strategy allows, then the agent exits
// non-zero so that systemd takes over.
func TestRestart_GivesUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.jsonl")
	writeReadings(t, input, 20000, 10, 4)
	path := writeConfig(t, dir, crashConfig+`
state {
  max_size = "1MiB"
  cache    = "1MiB"
}
restart {
  strategy = "fixed_delay"
  attempts = 2
  delay    = "100ms"
}
`)
	s, err := runEddy(t, "run", "-c", path)
	if err == nil {
		t.Fatal("agent exited 0 with a state store that cannot hold the job")
	}
	if c := strings.Count(s, "restarting from the last checkpoint"); c != 2 {
		t.Fatalf("%d restarts, want 2 (fixed_delay attempts)", c)
	}
	if !strings.Contains(s, "restart strategy gives up") || !strings.Contains(s, "state store full") {
		t.Fatal("the exit does not say why")
	}
}

// regionConfig is crashConfig with two failover regions: "sums" (a file of
// readings → tumbling windows → an exactly-once file sink, dead letters to
// %DEAD%), slowed down so that it is still running when a failure is
// injected, and, with %LIVE% set to liveConfig, "live" (simulated sensors on
// the embedded broker → pass-through → an at-least-once file sink).
var regionConfig = replaceAll(crashConfig,
	`device_id   = "crash"`, `device_id   = "region"`,
	"  delivery = \"exactly_once\"\n}\n", "  delivery = \"exactly_once\"\n}\nsink \"file\" \"dead\" { path = \"%DEAD%\" }\n",
	"  to = [sink.file.out]\n}", `  to                     = [sink.file.out]
  dead_letter            = sink.file.dead
  debug_delay_per_record = "20us"
  %EXTRA%
}`,
	"checkpoint {\n  interval = \"100ms\"\n}\n", `checkpoint {
  interval = "200ms"
}
restart {
  strategy = "fixed_delay"
  attempts = %ATTEMPTS%
  delay    = "2s"
}
%LIVE%
`)

const liveConfig = `
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices      = 10
  rate         = 1000
  max_readings = %LIVEN%
  malformed    = 0
}
sink "file" "live" { path = "%DIR%/live.jsonl" }
pipeline "live" {
  from = source.simulator.sim
  to   = [sink.file.live]
}
`

// liveReadings lasts 30 s at the simulator's 1,000 a second: live must
// still be publishing when sums fails (at the end of its 150,000 readings,
// seconds later on a loaded machine) and while it restarts.
const liveReadings = 30000

// regionRun writes the input and the configuration into a new directory.
func regionRun(t *testing.T, dead, extra string, attempts int, live bool) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	writeReadings(t, filepath.Join(dir, "in.jsonl"), 1000, 150, 5)
	if dead == "" {
		dead = filepath.Join(dir, "dead.jsonl")
	}
	lv := ""
	if live {
		lv = replaceAll(liveConfig, "%BROKER%", loopback.Addr(t), "%LIVEN%", strconv.Itoa(liveReadings))
	}
	return dir, writeConfig(t, dir, regionConfig, "%LIVE%", lv, "%DEAD%", dead, "%EXTRA%", extra, "%ATTEMPTS%", strconv.Itoa(attempts))
}

func fileLines(path string) int {
	b, _ := os.ReadFile(path)
	return countLines(b)
}

// TestRestart_RegionRestartsAlone injects each kind of failure into the
// "sums" pipeline of a running agent: a sink that fails (its directory
// replaced by a file for a while) and an operator panic (caught at the
// subtask's boundary). Only "sums" restarts from the last checkpoint;
// "live" keeps writing while "sums" is down and is never restored, so its
// at-least-once output has each reading exactly once; the exactly-once
// output of "sums" equals an uninterrupted run's.
func TestRestart_RegionRestartsAlone(t *testing.T) {
	t.Parallel()
	refDir, refPath := regionRun(t, "", "", 3, false)
	if _, err := runEddy(t, "run", "-c", refPath); err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	want := committedRecords(t, filepath.Join(refDir, "out"))
	if len(want) == 0 {
		t.Fatal("the uninterrupted run committed nothing")
	}
	for _, tc := range []struct {
		name   string
		extra  string
		inject func(t *testing.T, dir string, p *eddyProc)
		heal   func(dir string)
	}{
		{name: "sink fails", inject: func(t *testing.T, dir string, p *eddyProc) {
			await.True(t, 30*time.Second, `p.logContains("checkpoint completed")`, func() bool { return p.logContains("checkpoint completed") })
			out := filepath.Join(dir, "out")
			os.RemoveAll(out) // nothing is committed yet: sums releases its results at the end of its input
			os.WriteFile(out, []byte("not a directory"), 0o644)
		}, heal: func(dir string) { os.Remove(filepath.Join(dir, "out")) }},
		{name: "operator panics", extra: `debug_panic_at_offset = 90000`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := regionRun(t, "", tc.extra, 3, true)
			p := startEddy(t, "run", "-c", path)
			if tc.inject != nil {
				tc.inject(t, dir, p)
			}
			if !p.waitLog("restarting from the last checkpoint", 60*time.Second) {
				t.Fatal("sums did not restart")
			}
			live := filepath.Join(dir, "live.jsonl")
			atFailure := fileLines(live)
			if tc.heal != nil {
				tc.heal(dir)
			}
			if !p.waitLog("pipelines restarted", 30*time.Second) {
				t.Fatal("sums did not come back")
			}
			atRestart := fileLines(live)
			if atRestart <= atFailure {
				t.Errorf("pipeline live wrote nothing while sums was down (%d lines at the failure, %d at the restart)", atFailure, atRestart)
			}
			out := filepath.Join(dir, "out")
			if !await.Holds(60*time.Second, func() bool {
				return fileLines(live) >= liveReadings && len(committedRecords(t, out)) >= len(want)
			}) {
				t.Fatalf("the jobs did not finish: %d of %d live lines, %d of %d results",
					fileLines(live), liveReadings, len(committedRecords(t, out)), len(want))
			}
			p.stop(os.Interrupt, 60*time.Second)
			s := p.output()
			if strings.Contains(s, "pipelines=live") || strings.Contains(s, "pipelines=sums,live") {
				t.Error("pipeline live was restarted or restored")
			}
			if c := strings.Count(s, "restarting from the last checkpoint"); c != 1 {
				t.Errorf("%d restarts of sums, want 1", c)
			}
			if tc.name == "operator panics" {
				// The stack is logged once, where the panic was caught;
				// the lines about the failure name only its value.
				var stacks []string
				for _, line := range strings.Split(s, "\n") {
					if strings.Contains(line, "goroutine ") {
						stacks = append(stacks, line[:min(len(line), 80)])
					}
				}
				if len(stacks) != 1 || !strings.Contains(stacks[0], "pipeline stage panicked") {
					t.Errorf("log lines with a goroutine stack: %q, want the one of the panic", stacks)
				}
			}
			if n := fileLines(live); n != liveReadings {
				t.Errorf("live wrote %d lines, want each of the %d readings once", n, liveReadings)
			}
			if got := committedRecords(t, out); !slices.Equal(got, want) {
				t.Fatalf("committed output differs from the uninterrupted run: %d records, want %d", len(got), len(want))
			}
			// The restarted pipeline's checkpoints still record what its
			// state depends on, so that the next start can restore them.
			ms := manifests(filepath.Join(dir, "data", "checkpoints"))
			if len(ms) == 0 {
				t.Fatal("no checkpoint")
			}
			b, err := os.ReadFile(ms[len(ms)-1].path)
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Extra map[string][]byte `json:"extra"`
			}
			var shape struct{ Window string }
			if err := json.Unmarshal(b, &m); err != nil || json.Unmarshal(m.Extra["shape/sums"], &shape) != nil || shape.Window == "" {
				t.Fatalf("the last checkpoint after the restart records no state shape for sums: %q", m.Extra["shape/sums"])
			}
		})
	}
}

// TestRestart_DeadLetterFailureGivesUp: a malformed reading whose dead
// letter cannot be written (the dead-letter sink writes to /dev/full) fails
// the "sums" region every time it is replayed; after the strategy's
// restarts the agent exits non-zero, while "live" ran on meanwhile.
func TestRestart_DeadLetterFailureGivesUp(t *testing.T) {
	t.Parallel()
	dir, path := regionRun(t, "/dev/full", "", 1, true)
	f, err := os.OpenFile(filepath.Join(dir, "in.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{not json\n")
	f.Close()
	p := startEddy(t, "run", "-c", path)
	if !p.waitLog("restarting from the last checkpoint", 60*time.Second) {
		t.Fatal("sums did not restart")
	}
	live := filepath.Join(dir, "live.jsonl")
	atFailure := fileLines(live)
	if !p.wait(120 * time.Second) {
		t.Fatal("the agent did not give up")
	}
	if p.err == nil {
		t.Fatal("agent exited 0 although sums could not dead-letter a reading")
	}
	s := p.output()
	if c := strings.Count(s, "restarting from the last checkpoint"); c != 1 {
		t.Errorf("%d restarts, want 1 (attempts = 1)", c)
	}
	if !strings.Contains(s, "restart strategy gives up") || !strings.Contains(s, `sink \"dead\"`) {
		t.Error("the exit does not say why")
	}
	if strings.Contains(s, "pipelines=live") {
		t.Error("pipeline live was restarted")
	}
	if n := fileLines(live); n <= atFailure {
		t.Errorf("live stopped at the failure of sums: %d lines then, %d at the exit", atFailure, n)
	}
}

// ingestRegionConfig: simulated sensors on the embedded broker, through the
// durable ingest log, counted in count windows of 100 readings per device
// into an exactly-once file sink; the window subtask panics once at ingest
// offset 3000.
const ingestRegionConfig = `
agent {
  device_id   = "ingest-region"
  data_dir    = "%DATA%"
  admin       = ""
  parallelism = 2
  log_level   = "info"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices      = 10
  rate         = 1000
  max_readings = 8000
  malformed    = 0
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "counts" {
  from = source.simulator.sim
  key  = event.device
  window "count" { count = 100 }
  aggregate { n = count() }
  to                    = [sink.file.out]
  debug_panic_at_offset = 3000
}
checkpoint { interval = "200ms" }
restart {
  strategy = "fixed_delay"
  attempts = 3
  delay    = "500ms"
}
`

// TestRestart_RegionReplaysIngestLog: a region whose source is an ingest
// log (embedded broker) restarts after an operator panic by rewinding its
// reader to the checkpoint's position while the broker and the log keep
// taking readings in: every reading is counted exactly once (80 windows of
// 100, no id twice).
func TestRestart_RegionReplaysIngestLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startEddy(t, "run", "-c", writeConfig(t, dir, ingestRegionConfig, "%BROKER%", loopback.Addr(t)))
	out := filepath.Join(dir, "out")
	if !await.Holds(120*time.Second, func() bool { return len(committedRecords(t, out)) >= 80 }) {
		t.Fatalf("%d of 80 windows committed", len(committedRecords(t, out)))
	}
	p.stop(os.Interrupt, 60*time.Second)
	if c := strings.Count(p.output(), "restarting from the last checkpoint"); c != 1 {
		t.Fatalf("%d restarts, want 1 (the injected panic)", c)
	}
	recs := committedRecords(t, out) // fails on an id seen twice
	total := 0
	for _, line := range recs {
		var r struct{ N int }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.N != 100 {
			t.Errorf("a count window of %d readings, want 100: %s", r.N, line)
		}
		total += r.N
	}
	if len(recs) != 80 || total != 8000 {
		t.Fatalf("%d windows counting %d readings, want 80 counting 8000", len(recs), total)
	}
}
