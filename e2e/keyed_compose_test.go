package e2e

// Composed per-key blocks through the real binary: dedup in front of a
// window (the counts are those of a plain model; SIGKILLs and a rescale
// give the uninterrupted run's output), several blocks chained in one
// pipeline (a replay is byte-identical at parallelism 1 and 3), and what
// `eddy validate` refuses.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// keyedConfigFunctions is the per-key part of keyedConfig's pipeline,
// which the configurations below replace.
const keyedConfigFunctions = `  filter = changed(event.s)
  map {
    s      = event.s
    was    = prev(event.c)
    d      = delta(event.c)
    n      = count_key()
    first  = first_seen()
  }`

// keyedDedupWindowConfig drops a device's repeated counter c within 5 s,
// then counts and sums the rest per 10 s window.
var keyedDedupWindowConfig = replaceAll(keyedConfig, keyedConfigFunctions, `  dedup {
    id     = event.c
    within = "5s"
  }
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.c)
  }`)

// TestCompose_DedupWindowMatchesModel checks the windows of the dedup →
// window pipeline against a model: late readings as in
// TestKeyed_ChangedMatchesModel; of the others, per key in (time, line)
// order, a reading passes unless one with the same c passed less than 5 s
// before; each 10 s window of a key counts and sums the c that passed.
func TestCompose_DedupWindowMatchesModel(t *testing.T) {
	dir := t.TempDir()
	in := writeStateReadings(t, filepath.Join(dir, "in.jsonl"), 30, 200, 29)
	runToEndWith(t, dir, replaceAll(keyedDedupWindowConfig, "parallelism = 1", "parallelism = 2"))

	type agg struct{ n, sum int }
	want := map[string]agg{}
	perKey, _ := onTimeByKey(in, nil)
	dropped := 0
	for key, rs := range perKey {
		passed, n := dedupModel(rs, 5000)
		dropped += n
		for _, r := range passed {
			w := fmt.Sprintf("%s/%d", key, r.TS-r.TS%10_000)
			a := want[w]
			a.n++
			a.sum += r.C
			want[w] = a
		}
	}
	lines := committedRecords(t, filepath.Join(dir, "out"))
	if len(lines) != len(want) || dropped == 0 {
		t.Fatalf("%d windows, the model gives %d (%d readings dropped)", len(lines), len(want), dropped)
	}
	for _, l := range lines {
		var got struct {
			Key   string `json:"key"`
			Start int64  `json:"window_start_ms"`
			N     int    `json:"n"`
			Sum   int    `json:"sum"`
		}
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		w := fmt.Sprintf("%s/%d", got.Key, got.Start)
		if a, ok := want[w]; !ok || a.n != got.N || a.sum != got.Sum {
			t.Fatalf("window %s: n=%d sum=%d, the model gives %+v (found %v)", w, got.N, got.Sum, a, ok)
		}
	}
	t.Logf("%d readings: %d dropped, %d windows", len(in), dropped, len(lines))
}

// dedupWindowCrashConfig is crashConfig with a second pipeline on the
// same input that drops a device's repeated value within 10 s before its
// windows count and sum them, writing to a second exactly-once sink.
var dedupWindowCrashConfig = replaceAll(keyedCrashConfig, `  filter = changed(event.v >= 990)
  map {
    high = event.v >= 990
    was  = prev(event.v)
    d    = delta(event.v)
    n    = count_key()
  }
  state_ttl = "3s"`, `  dedup {
    id     = event.v % 100
    within = "10s"
  }
  window "tumbling" { size = "10s" }
  aggregate {
    n   = count()
    sum = sum(event.v)
  }`)

// TestCompose_DedupWindowExactlyOnce kills the binary with SIGKILL at
// random moments while the dedup → window pipeline runs beside a plain
// window; after restarts the output equals the uninterrupted run's.
func TestCompose_DedupWindowExactlyOnce(t *testing.T) {
	crashFileSource(t, dedupWindowCrashConfig, false)
}

// TestCompose_DedupWindowRescale restores the dedup → window pipeline's
// checkpoints taken at parallelism 1 with 3 subtasks: the output equals
// the uninterrupted run's.
func TestCompose_DedupWindowRescale(t *testing.T) {
	rescaleThrough(t, dedupWindowCrashConfig, "1", "3")
}

// chainedBlocks are the blocks of keyedChainConfig after its dedup: a
// silence of 4 s (event time), a report on c moving 20, and two alarms on
// the state s.
var chainedBlocks = []string{`  absence {
    timeout = "4s"
    time    = "event"
  }`, `  report_by_exception {
    value    = event.c
    deadband = 20
  }`, `  alarm "stopped" {
    raise = event.s == "off"
    clear = event.s == "on"
  }`, `  alarm "idle" {
    raise        = event.s == "idle"
    min_duration = "2s"
  }`}

// dedupThen is keyedConfig with dedup of the counter c, then blocks.
func dedupThen(blocks ...string) string {
	return replaceAll(keyedConfig, keyedConfigFunctions, `  dedup {
    id     = event.c
    within = "5s"
  }
`+strings.Join(blocks, "\n")+`
  map { s = event.s }`)
}

// keyedChainConfig chains every kind of block on one key.
var keyedChainConfig = dedupThen(chainedBlocks...)

// TestCompose_ChainedBlocksReplayIdentical replays one file through the
// chained pipeline at parallelism 1 and 3: the outputs are byte-identical,
// every block emitted records, and the records are exactly those of the
// pipelines with dedup and one of the blocks each, together (chaining
// loses, adds and changes none: records of several blocks at one key and
// time are all kept).
func TestCompose_ChainedBlocksReplayIdentical(t *testing.T) {
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeStateReadings(t, input, 40, 200, 31)
	run := func(tmpl string) (string, []string) {
		dir := t.TempDir()
		if err := os.Link(input, filepath.Join(dir, "in.jsonl")); err != nil {
			t.Fatal(err)
		}
		runToEndWith(t, dir, tmpl)
		return dir, committedRecords(t, filepath.Join(dir, "out")) // fails on a duplicated id
	}
	var alone []string
	for _, b := range chainedBlocks {
		_, lines := run(dedupThen(b))
		alone = append(alone, lines...)
	}
	slices.Sort(alone)
	var outs [][]byte
	for _, par := range []string{"1", "3"} {
		dir, lines := run(replaceAll(keyedChainConfig, "parallelism = 1", "parallelism = "+par))
		if sorted := slices.Sorted(slices.Values(lines)); !slices.Equal(sorted, alone) {
			t.Errorf("parallelism %s: %d records, the blocks alone give %d", par, len(lines), len(alone))
		}
		kinds := map[string]int{}
		for _, l := range lines {
			var r struct{ ID, Kind string }
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			block := strings.Split(r.ID, "/")[3]
			kinds[block+" "+r.Kind]++
		}
		for _, k := range []string{"absence silent", "absence resumed", "report_by_exception report", "stopped raised", "stopped cleared", "idle raised", "idle cleared"} {
			if kinds[k] == 0 {
				t.Errorf("parallelism %s: no %q records (%v)", par, k, kinds)
			}
		}
		outs = append(outs, rawRecords(t, filepath.Join(dir, "out")))
	}
	if string(outs[0]) != string(outs[1]) {
		t.Fatalf("parallelism 1 and 3 differ: %d vs %d bytes", len(outs[0]), len(outs[1]))
	}
}

// TestCompose_ValidateRefuses runs `eddy validate` on compositions it
// refuses: the diagnostic names the file, line and column, and the fix
// (or the clash).
func TestCompose_ValidateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"report_by_exception with a window", `  map {
    s = event.s
  }`, `  window "tumbling" { size = "10s" }
  aggregate { n = count() }`, `agent.hcl:27:3: error: report_by_exception with a window; report_by_exception follows readings one by one and emits records of its own, and a window aggregates them; a pipeline has one or the other (only dedup may come before a window)`},
		{"two alarms of one name", `  map {
    s = event.s
  }`, `  alarm "hot" { raise = event.c > 1 }
  alarm "hot" { raise = event.c > 2 }`, `agent.hcl:33:9: error: Duplicate alarm name; An alarm named "hot" is already declared at `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "agent.hcl")
			src := strings.ReplaceAll(strings.ReplaceAll(replaceAll(keyedReportConfig, tc.from, tc.to), "%DIR%", dir), "%DATA%", filepath.Join(dir, "data"))
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := runEddy(t, "validate", "-c", path)
			if err == nil || !strings.Contains(out, path+":"+strings.TrimPrefix(tc.want, "agent.hcl:")) {
				t.Fatalf("eddy validate: %v\n%s\nwant %s", err, out, tc.want)
			}
		})
	}
}

// reloadReportConfig reports the simulator's temperatures by exception:
// with a deadband of 1000 only each device's first reading.
var reloadReportConfig = replaceAll(reloadConfig, `pipeline "p1" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "%SIZE%"
  }
  aggregate { n = count() }
  to = [sink.file.one]
}`, `pipeline "p1" {
  from   = source.simulator.sim
  filter = event.temp != null
  key    = event.device
  report_by_exception {
    value    = event.temp
    deadband = %SIZE%
  }
  to = [sink.file.one]
}`)

// TestKeyedControl_DeadbandChangedByReload changes a running
// report_by_exception's deadband, a block setting (not an expression, so
// not something control.* can set), the way docs/keyed-state.md tells: in
// the file, then SIGHUP. The reload
// keeps each key's state: after it the keys report their changes with the
// seqs following their first report, and none starts afresh with a
// second first report (seq 0).
func TestKeyedControl_DeadbandChangedByReload(t *testing.T) {
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	ag := startAgent(t, dir, reloadReportConfig, "%BROKER%", brokerAddr, "%SIZE%", "1000", "%EXTRA%", "")
	type report struct {
		ID, Key string
	}
	reports := func() (seq0 map[string]map[string]bool, later int) {
		seq0 = map[string]map[string]bool{}
		b, _ := os.ReadFile(filepath.Join(dir, "one.jsonl"))
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r report
			if json.Unmarshal([]byte(l), &r) != nil {
				continue
			}
			if strings.HasSuffix(r.ID, "/0") {
				if seq0[r.Key] == nil {
					seq0[r.Key] = map[string]bool{}
				}
				seq0[r.Key][r.ID] = true
			} else {
				later++
			}
		}
		return seq0, later
	}
	await.True(t, 15*time.Second, `len(s) == 3`, func() bool { s, _ := reports(); return len(s) == 3 })
	await.True(t, 15*time.Second, `ag.logContains("checkpoint completed")`, func() bool { return ag.logContains("checkpoint completed") })
	if _, later := reports(); later != 0 {
		t.Fatalf("%d reports after the first ones with a deadband of 1000", later)
	}
	writeConfig(t, dir, reloadReportConfig, "%BROKER%", brokerAddr, "%SIZE%", "0", "%EXTRA%", "", "%ADMIN%", ag.admin)
	ag.signal(syscall.SIGHUP)
	await.True(t, 20*time.Second, `ag.logContains("configuration reloaded")`, func() bool { return ag.logContains("configuration reloaded") })
	await.True(t, 20*time.Second, `later >= 30`, func() bool { _, later := reports(); return later >= 30 })
	ag.stop(syscall.SIGTERM, 20*time.Second)
	seq0, later := reports()
	for key, ids := range seq0 {
		if len(ids) != 1 {
			t.Errorf("key %s reported as new %d times (%v): its state was lost at the reload", key, len(ids), ids)
		}
	}
	t.Logf("%d keys, %d reports after the reload", len(seq0), later)
}
