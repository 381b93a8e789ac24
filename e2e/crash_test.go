package e2e

// Crash tests: the real binary killed with SIGKILL at random moments and
// restarted must produce exactly the output of an uninterrupted run.

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

// committedRecords reads the committed part files of an exactly-once file
// sink directory, in order, and fails on a duplicated id.
func committedRecords(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var lines []string
	seen := map[string]bool{}
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r struct{ ID string }
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: bad record %q: %v", n, sc.Text(), err)
			}
			if seen[r.ID] {
				t.Fatalf("duplicated record %s in committed output", r.ID)
			}
			seen[r.ID] = true
			lines = append(lines, sc.Text())
		}
		f.Close()
	}
	return lines
}

func writeReadings(t *testing.T, path string, devices, perDevice int, seed uint64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	base := int64(1_700_000_000_000)
	// Appended, not formatted with fmt: under the race detector fmt costs
	// about 6 s of CPU per million readings, and the crash tests write
	// millions while other tests run beside them.
	var line []byte
	for i := 0; i < perDevice; i++ {
		for d := 0; d < devices; d++ {
			// Out of order within the 5 s bound: jitter of up to 4 s.
			ts := base + int64(i)*1000 + rng.Int64N(4000)
			line = append(line[:0], `{"device":"dev-`...)
			line = strconv.AppendInt(line, int64(d), 10)
			line = append(line, `","ts":`...)
			line = strconv.AppendInt(line, ts, 10)
			line = append(line, `,"v":`...)
			line = strconv.AppendInt(line, int64(rng.IntN(1000)), 10)
			w.Write(append(line, "}\n"...))
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

const crashConfig = `
agent {
  device_id   = "crash"
  data_dir    = "%DATA%"
  admin       = ""
  parallelism = 2
  log_level   = "info"
}
source "file" "in" {
  path = "%DIR%/in.jsonl"
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_out_of_orderness = "5s" }
}
sink "file" "out" {
  path     = "%DIR%/out"
  delivery = "exactly_once"
}
pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
    max = max(event.v)
  }
  to = [sink.file.out]
}
checkpoint {
  interval = "100ms"
}
`

// slidingConfig is crashConfig with sliding windows kept in panes (the
// slide divides the size) and a watermark bound (2 s) below the readings'
// jitter (4 s) within allowed lateness, so late readings re-fire windows
// (late_update) that may have fired before a crash.
var slidingConfig = replaceAll(crashConfig, `  window "tumbling" { size = "10s" }`, `  window "sliding" {
    size             = "30s"
    slide            = "10s"
    allowed_lateness = "3s"
  }`, `max_out_of_orderness = "5s"`, `max_out_of_orderness = "2s"`)

// killDelay picks when, after now, run number n of a crash test is killed.
// Odd runs die at a random moment of their first quarter of a whole run's
// time (cleanRun): during the restore, the first reads or the first
// checkpoint. Even runs first wait, for as long as it takes, until they have
// completed a checkpoint of their own, then die a random moment up to one
// checkpoint interval (100 ms) later, before, during or after the next
// barrier. Waiting on the log instead of a fixed time makes progress, and so
// the restores the test asserts, independent of how fast a loaded machine
// starts the binary (CI's once took longer than 250 ms to its first
// checkpoint, so every kill of a fixed schedule came before it).
//
// waitFor, if given, replaces "checkpoint completed" as the log line an
// even run waits for, in turn.
func killDelay(t *testing.T, p *eddyProc, n int, rng *rand.Rand, cleanRun time.Duration, waitFor ...string) time.Duration {
	t.Helper()
	if n%2 == 1 {
		return time.Duration(rng.Int64N(int64(cleanRun)/4 + 1))
	}
	line := "checkpoint completed"
	if len(waitFor) > 0 {
		line = waitFor[n/2%len(waitFor)]
	}
	if !await.Holds(60*time.Second, func() bool { return p.exited() || p.logContains(line) }) {
		t.Fatalf("run logged no %q within 60 s", line)
	}
	return time.Duration(rng.Int64N(int64(100 * time.Millisecond)))
}

func runToEnd(t *testing.T, dir string) {
	t.Helper()
	runToEndWith(t, dir, crashConfig)
}

// TestCrash_FileSourceExactlyOnce kills the binary with SIGKILL at random
// moments while it replays a file into windows and an exactly-once file
// sink; after each kill it restarts (restoring the last checkpoint). The
// committed output must equal that of an uninterrupted run: no reading lost,
// none counted twice, no record duplicated.
func TestCrash_FileSourceExactlyOnce(t *testing.T) {
	t.Parallel()
	t.Run("tumbling", func(t *testing.T) { crashFileSource(t, crashConfig, false) })
	t.Run("sliding in panes", func(t *testing.T) { crashFileSource(t, slidingConfig, false) })
	t.Run("compacted often", func(t *testing.T) { crashFileSource(t, compactingConfig, true) })
	t.Run("changed() beside the window", func(t *testing.T) { crashFileSource(t, keyedCrashConfig, false) })
	t.Run("report_by_exception and dedup beside the window", func(t *testing.T) { crashFileSource(t, reportCrashConfig, false) })
	t.Run("absence beside the window", func(t *testing.T) { crashFileSource(t, absenceCrashConfig, false) })
	t.Run("state read from the checkpoint files", func(t *testing.T) { crashFileSourceSized(t, coldCrashConfig, false, 50000, 6) })
}

// coldCrashConfig is compactingConfig (a chain merged into a new base every
// few checkpoints) with the smallest state cache, for an input of 50,000
// keys: their windows outgrow the window store's decoded cache and the
// write-back cache under it, so most reads of a window's state miss both
// and come from the checkpoint files (the default read_checkpoints), whose
// chain the merges rebase and each restore reads in place.
var coldCrashConfig = compactingConfig + `state { cache = "1MiB" }
`

// absenceCrashConfig is keyedCrashConfig with absence instead of the
// functions: a key whose readings with v < 500 stop for 3 s is silent
// (found on the event-time timers, which the checkpoints hold), and
// resumed by the next one.
var absenceCrashConfig = replaceAll(keyedCrashConfig, `  filter = changed(event.v >= 990)
  map {
    high = event.v >= 990
    was  = prev(event.v)
    d    = delta(event.v)
    n    = count_key()
  }
  state_ttl = "3s"`, `  filter = event.v < 500
  absence {
    timeout = "3s"
    time    = "event"
  }
  state_ttl = "10s"`)

// reportCrashConfig is keyedCrashConfig with the per-key blocks instead of
// the functions: dedup drops a key's repeated value within 10 s, then
// report_by_exception reports moves of 300 or more and a heartbeat every
// 5 s (with the 3 s state_ttl, some keys' report state expires).
var reportCrashConfig = replaceAll(keyedCrashConfig, `  filter = changed(event.v >= 990)
  map {
    high = event.v >= 990
    was  = prev(event.v)
    d    = delta(event.v)
    n    = count_key()
  }`, `  dedup {
    id     = event.v
    within = "10s"
  }
  report_by_exception {
    value     = event.v
    deadband  = 300
    heartbeat = "5s"
  }`)

// keyedCrashConfig is crashConfig with a second pipeline on the same input
// whose per-key functions run in event-time order, with a state_ttl short
// enough (3 s, against readings 1 s apart with 4 s of jitter) that some
// keys' state expires, writing to a second exactly-once sink.
var keyedCrashConfig = replaceAll(crashConfig, "checkpoint {", `sink "file" "changes" {
  path     = "%DIR%/changes"
  delivery = "exactly_once"
}
pipeline "changes" {
  from   = source.file.in
  key    = event.device
  filter = changed(event.v >= 990)
  map {
    high = event.v >= 990
    was  = prev(event.v)
    d    = delta(event.v)
    n    = count_key()
  }
  state_ttl = "3s"
  to        = [sink.file.changes]
}
checkpoint {`)

// compactingConfig is crashConfig with a small max_chain_ratio, so that a
// new base follows every few increments, merged in the background although
// the state is small, and the kills fall before, during and after many
// compactions; each reading is delayed a little, so that the
// job outlasts several merges (unslowed, it could end after two kills on
// an idle machine, before any kill fell during a merge).
var compactingConfig = replaceAll(crashConfig, `  interval = "100ms"`, `  interval           = "100ms"
  max_chain_ratio    = 0.01
  debug_always_merge = true`, "  to = [sink.file.out]\n}", "  to = [sink.file.out]\n  debug_delay_per_record = \"5us\"\n}")

// newBases counts, in a run's log, the chains compacted into a new base:
// merged in the background, or replaced by a full checkpoint that completed
// after an incremental one.
func newBases(log string) int {
	n, chained := 0, false
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "checkpoint chains merged into a new base") {
			n++
		}
		if !strings.Contains(line, "checkpoint completed") {
			continue
		}
		switch {
		case strings.Contains(line, "kind=incremental"):
			chained = true
		case strings.Contains(line, "kind=full") && chained:
			n, chained = n+1, false
		}
	}
	return n
}

// fileCrashScale is the size of the file-source crash test: readings per
// device (of 1,000 devices) and kills. CI runs the short version, 300
// readings and 5 kills: the input still spans dozens of checkpoints and
// makes more records than the test requires (31k window results, 14k
// changed() records), and runs 2 and 4 still wait for a checkpoint of
// their own after a restore, so the restores the test asserts happen as
// in the long one. A compacting run keeps 1,200 readings and 10 kills: its
// job must outlast the merges its kills wait for, and runs 2 and 6 both
// wait for a merge to start, so that one of them dies during it.
// EDDY_CRASH_LONG=1 (scripts/crash-long.sh) runs 1,200 readings and 10
// kills for every pipeline.
func fileCrashScale(compacting bool) (perDevice, kills int) {
	if compacting || os.Getenv("EDDY_CRASH_LONG") != "" {
		return 1200, 10
	}
	return 300, 5
}

// crashFileSource runs the crash test on the config template tmpl. With
// compacting, half the runs that wait for a checkpoint before their kill
// wait for a chain merged into a new base instead, the other half for a
// merge to start (most of them die during it); the runs must have
// compacted a chain and been killed during a merge at least once each (the
// input may end before more kills come). sameChanges, if given, replaces
// the in-order comparison of the keyed pipeline's output (and the check of
// its size) with its own.
func crashFileSource(t *testing.T, tmpl string, compacting bool, sameChanges ...func(t *testing.T, got, want []string)) {
	perDevice, _ := fileCrashScale(compacting)
	crashFileSourceSized(t, tmpl, compacting, 1000, perDevice, sameChanges...)
}

// crashFileSourceSized is crashFileSource on an input of devices keys with
// perDevice readings each.
func crashFileSourceSized(t *testing.T, tmpl string, compacting bool, devices, perDevice int, sameChanges ...func(t *testing.T, got, want []string)) {
	t.Parallel()
	_, killsWanted := fileCrashScale(compacting)
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeReadings(t, input, devices, perDevice, 7)

	clean := t.TempDir()
	os.Link(input, filepath.Join(clean, "in.jsonl"))
	start := time.Now()
	runToEndWith(t, clean, tmpl)
	cleanRun := time.Since(start)
	t.Logf("uninterrupted run: %v", cleanRun)
	want := committedRecords(t, filepath.Join(clean, "out"))
	if len(want) < 1000*20 {
		t.Fatalf("uninterrupted run produced %d records", len(want))
	}
	keyed := strings.Contains(tmpl, `pipeline "changes"`)
	var wantChanges []string
	if keyed {
		if wantChanges = committedRecords(t, filepath.Join(clean, "changes")); len(wantChanges) < 1000*10 && len(sameChanges) == 0 {
			t.Fatalf("uninterrupted run produced %d changes", len(wantChanges))
		}
	}

	crashed := t.TempDir()
	os.Link(input, filepath.Join(crashed, "in.jsonl"))
	path := writeConfig(t, crashed, tmpl)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill schedule seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	kills, restores, bases, midMerge := 0, 0, 0, 0
	for kills < killsWanted {
		p := startEddy(t, "run", "-c", path)
		var waitFor []string
		if compacting {
			waitFor = []string{"checkpoint chains merged into a new base", "merging checkpoint chains"}
		}
		if p.wait(killDelay(t, p, kills, rng, cleanRun, waitFor...)) {
			if p.err != nil {
				t.Fatalf("run exited with %v", p.err)
			}
			t.Logf("run finished by itself after %d kills", kills)
			kills = 100
		} else {
			p.kill()
			kills++
		}
		if p.logContains("restored checkpoint") {
			restores++
		}
		bases += newBases(p.output())
		if p.err != nil && strings.Count(p.output(), "merging checkpoint chains") > strings.Count(p.output(), "checkpoint chains merged") {
			midMerge++
		}
	}
	if kills != 100 {
		runToEndWith(t, crashed, tmpl)
	}
	if restores < 2 {
		t.Fatalf("only %d of the runs restored a checkpoint: the kills came too early to test recovery", restores)
	}
	t.Logf("%d kills, %d restores from a checkpoint, %d chains compacted into a new base, %d kills during a merge", kills, restores, bases, midMerge)
	if compacting && (bases < 1 || midMerge < 1) {
		t.Fatalf("the crashed runs compacted %d chains and %d died during a merge, want at least 1 of each", bases, midMerge)
	}
	got := committedRecords(t, filepath.Join(crashed, "out"))
	if !slices.Equal(got, want) {
		t.Fatalf("output after %d kills differs from the uninterrupted run: %d records vs %d", kills, len(got), len(want))
	}
	if keyed {
		got := committedRecords(t, filepath.Join(crashed, "changes"))
		if len(sameChanges) > 0 {
			sameChanges[0](t, got, wantChanges)
		} else if !slices.Equal(got, wantChanges) {
			i := 0
			for i < min(len(got), len(wantChanges)) && got[i] == wantChanges[i] {
				i++
			}
			t.Fatalf("changes after %d kills differ from the uninterrupted run: %d records vs %d; first difference at %d:\n%s\nwant\n%s",
				kills, len(got), len(wantChanges), i, strings.Join(got[i:min(i+3, len(got))], "\n"), strings.Join(wantChanges[i:min(i+3, len(wantChanges))], "\n"))
		}
	}
	checkNoOrphanFiles(t, filepath.Join(crashed, "data", "checkpoints"))
}

// checkNoOrphanFiles checks that every snapshot file in a checkpoint store
// is referenced by one of its manifests, and nothing else is left there
// (no temp file of an interrupted write or merge).
func checkNoOrphanFiles(t *testing.T, dir string) {
	t.Helper()
	referenced := map[string]bool{}
	manifests, _ := filepath.Glob(filepath.Join(dir, "manifests", "*"))
	for _, path := range manifests {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Files []struct{ Name string } `json:"files"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, f := range m.Files {
			referenced[f.Name] = true
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "files", "*"))
	for _, path := range files {
		if name := "files/" + filepath.Base(path); !referenced[name] {
			t.Errorf("%s is referenced by none of the %d manifests", name, len(manifests))
		}
	}
	if len(files) == 0 {
		t.Error("no snapshot files at all")
	}
}

// TestRescale_RestoreWithOtherParallelism stops a job after a few
// checkpoints and restarts it with 3 subtasks instead of 2, then 1: state is
// redistributed by key group and the output equals an uninterrupted run.
func TestRescale_RestoreWithOtherParallelism(t *testing.T) {
	t.Parallel()
	t.Run("tumbling", func(t *testing.T) { rescale(t, crashConfig) })
	t.Run("sliding in panes", func(t *testing.T) { rescale(t, slidingConfig) })
	t.Run("changed() beside the window", func(t *testing.T) { rescale(t, keyedCrashConfig) })
	t.Run("report_by_exception and dedup beside the window", func(t *testing.T) { rescale(t, reportCrashConfig) })
}

// TestRescale_AbsenceOneToThreeAndBack restores the event-time absence
// pipeline's checkpoints (its timers and per-key state) taken at
// parallelism 1 with 3 subtasks, and those taken at 3 with 1: the output
// equals an uninterrupted run's.
func TestRescale_AbsenceOneToThreeAndBack(t *testing.T) {
	t.Parallel()
	t.Run("1 → 3", func(t *testing.T) { rescaleThrough(t, absenceCrashConfig, "1", "3") })
	t.Run("3 → 1", func(t *testing.T) { rescaleThrough(t, absenceCrashConfig, "3", "1") })
}

func rescale(t *testing.T, tmpl string) { rescaleThrough(t, tmpl, "2", "3", "1") }

// rescaleThrough runs tmpl at each parallelism of killed in turn, killing
// each run after two checkpoints of its own, then runs it to the end at
// the last one, and compares the output with an uninterrupted run's (at
// the template's parallelism, 2).
func rescaleThrough(t *testing.T, tmpl string, parallelisms ...string) {
	t.Parallel()
	killed, final := parallelisms[:len(parallelisms)-1], parallelisms[len(parallelisms)-1]
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeReadings(t, input, 1000, 300, 5)
	clean := t.TempDir()
	os.Link(input, filepath.Join(clean, "in.jsonl"))
	runToEndWith(t, clean, tmpl)
	want := committedRecords(t, filepath.Join(clean, "out"))
	keyed := strings.Contains(tmpl, `pipeline "changes"`)
	var wantChanges []string
	if keyed {
		wantChanges = committedRecords(t, filepath.Join(clean, "changes"))
	}

	dir := t.TempDir()
	os.Link(input, filepath.Join(dir, "in.jsonl"))
	root := filepath.Join(dir, "data", "checkpoints")
	for _, parallelism := range killed {
		path := writeConfig(t, dir, tmpl, "parallelism = 2", "parallelism = "+parallelism)
		newest := func() uint64 {
			ms := manifests(root)
			if len(ms) == 0 {
				return 0
			}
			return ms[len(ms)-1].id
		}
		before := newest()
		p := startEddy(t, "run", "-c", path)
		await.True(t, 30*time.Second, `p.exited() || newest() >= before+2`, func() bool {
			return p.exited() || newest() >= before+2 // exited: the job reached its end first, nothing to kill
		})
		p.kill()
	}
	if _, err := runEddy(t, "run", "-c", writeConfig(t, dir, tmpl, "parallelism = 2", "parallelism = "+final)); err != nil {
		t.Fatalf("final run: %v", err)
	}
	steps := strings.Join(parallelisms, " → ")
	if got := committedRecords(t, filepath.Join(dir, "out")); !slices.Equal(got, want) {
		t.Fatalf("after rescaling %s: %d records, want %d", steps, len(got), len(want))
	}
	if keyed {
		if got := committedRecords(t, filepath.Join(dir, "changes")); !slices.Equal(got, wantChanges) || len(got) == 0 {
			t.Fatalf("changes after rescaling %s: %d records, want %d (and some)", steps, len(got), len(wantChanges))
		}
	}
}
