package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// rollDef is one definition of a pipeline as the reference computes it:
// tumbling windows of size ms, keyed by device, over the readings the
// filter keeps, with n, sum and max, or top alone.
type rollDef struct {
	size   int64
	top    bool // top = max(event.v) only
	min    bool // min = min(event.v) too
	filter func(v int64) bool
}

// TestRollover_ChangedPipelineExactlyOnce changes a pipeline of a device
// that has a checkpoint with windows open and readings still to read, and
// checks, per kind of change: that validate says "roll over" with the
// change and the cut, word for word what run then logs, and exits 0; that
// run, SIGKILLed at random moments during the rollover and restarted,
// never exits with an error; and that the committed results, each exactly
// once, equal a reference computed from the same readings: the old
// definition's windows for the readings before the cut, the new one's for
// those from it, each result carrying its definition's hash.
func TestRollover_ChangedPipelineExactlyOnce(t *testing.T) {
	t.Parallel()
	base := checkpointOf(t, twoPipelines)
	sums := rollDef{size: 10_000}
	tops := rollDef{size: 10_000, top: true}
	for _, tc := range []struct {
		name string
		tmpl string
		// pipeline is the one that rolls over, line what validate prints
		// of it with CUT for the cut; renamed is the rename's line.
		pipeline, line, renamed string
		// sumsNew and maxesNew are the definitions from the cut (nil: the
		// pipeline takes no reading from it); newMaxes is the name the
		// maxes pipeline has from the cut.
		sumsNew, maxesNew *rollDef
		newMaxes          string
	}{
		{name: "add an aggregate", tmpl: strings.Replace(twoPipelines, "    max = max(event.v)\n", "    max = max(event.v)\n    min = min(event.v)\n", 1),
			pipeline: "sums", line: `roll over: aggregates changed (min added): its open windows finish as before; windows from CUT use the new aggregates`,
			sumsNew: &rollDef{size: 10_000, min: true}, maxesNew: &tops},
		{name: "window size 10s to 1m", tmpl: strings.Replace(twoPipelines, `window "tumbling" { size = "10s" }`, `window "tumbling" { size = "1m" }`, 1),
			pipeline: "sums", line: `roll over: window changed (size 10s → 1m0s): its open windows finish as before; windows from CUT use the new window`,
			sumsNew: &rollDef{size: 60_000}, maxesNew: &tops},
		{name: "change the key", tmpl: strings.Replace(twoPipelines, "  key  = event.device\n", "  key  = lower(event.device)\n", 1),
			pipeline: "sums", line: `roll over: key changed (event.device → lower(event.device)): its open windows finish as before; windows from CUT use the new key`,
			sumsNew: &sums, maxesNew: &tops},
		{name: "add a filter", tmpl: strings.Replace(twoPipelines, "  key  = event.device\n", "  key  = event.device\n  filter = event.v >= 10\n", 1),
			pipeline: "sums", line: `roll over: filter changed (none → event.v >= 10): its open windows finish as before; windows from CUT use the new filter`,
			sumsNew: &rollDef{size: 10_000, filter: func(v int64) bool { return v >= 10 }}, maxesNew: &tops},
		{name: "remove a pipeline", tmpl: slow(crashConfig) + "sink \"file\" \"peaks\" {\n  path     = \"%DIR%/peaks\"\n  delivery = \"exactly_once\"\n}\n",
			pipeline: "maxes", line: `roll over: removed from the configuration: its open windows finish as before; it takes no reading from CUT`,
			sumsNew: &sums},
		{name: "rename a pipeline", tmpl: strings.Replace(twoPipelines, `pipeline "maxes"`, `pipeline "peaks"`, 1),
			pipeline: "maxes", line: `roll over: removed from the configuration: its open windows finish as before; it takes no reading from CUT`,
			renamed: `start empty (renamed from "maxes"): windows from CUT are its`,
			sumsNew: &sums, maxesNew: &tops, newMaxes: "peaks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			copyTree(t, base, dir, "data", "in.jsonl")
			path := writeConfig(t, dir, tc.tmpl)

			stdout, stderr, code := runSplit(t, "validate", "-c", path)
			if code != 0 || strings.Contains(stderr, "error") {
				t.Fatalf("validate: exit %d, stderr %q; want 0: run starts\n%s", code, stderr, stdout)
			}
			re := regexp.MustCompile(`(?m)^  pipeline "` + tc.pipeline + `": (roll over: .*)$`)
			m := re.FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("validate does not say pipeline %q rolls over:\n%s", tc.pipeline, stdout)
			}
			cutText := regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`).FindString(m[1])
			cutAt, err := time.Parse(time.RFC3339Nano, cutText)
			if err != nil {
				t.Fatalf("no cut in %q", m[1])
			}
			if want := strings.ReplaceAll(tc.line, "CUT", cutText); m[1] != want {
				t.Fatalf("validate says\n%s\nwant\n%s", m[1], want)
			}
			cut := cutAt.UnixMilli()
			var renamedLine string
			if tc.renamed != "" {
				renamedLine = fmt.Sprintf(`  pipeline %q: %s`, tc.newMaxes, strings.ReplaceAll(tc.renamed, "CUT", cutText))
				if !strings.Contains(stdout, renamedLine+"\n") {
					t.Fatalf("validate does not say\n%s\n:\n%s", renamedLine, stdout)
				}
			}

			// Run, killed at random moments while both definitions run,
			// then to the end of the input.
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
			for kill := 0; ; kill++ {
				p := startEddy(t, "run", "-c", path)
				if kill == 0 {
					logged := fmt.Sprintf(`msg="restore: pipeline \"%s\": %s"`, tc.pipeline, strings.ReplaceAll(m[1], `"`, `\"`))
					if !p.waitLog(logged, 20*time.Second) {
						t.Fatalf("run does not log what validate said:\n%s", logged)
					}
					if renamedLine != "" && !p.waitLog(strings.ReplaceAll(strings.TrimPrefix(renamedLine, "  "), `"`, `\"`), 20*time.Second) {
						t.Fatalf("run does not log what validate said:\n%s", renamedLine)
					}
				}
				if kill == 2 {
					if !p.wait(2 * time.Minute) {
						t.Fatal("run did not end within 2 minutes")
					}
					if p.err != nil {
						t.Fatalf("run exited with %v", p.err)
					}
					break
				}
				if !p.waitLog("checkpoint completed", 30*time.Second) {
					t.Fatalf("no checkpoint within 30 s")
				}
				if p.wait(time.Duration(rng.Int64N(int64(300 * time.Millisecond)))) {
					if p.err != nil {
						t.Fatalf("run exited with %v", p.err)
					}
					break // it ended before the kill
				}
				p.kill()
			}

			readings := readReadings(t, filepath.Join(dir, "in.jsonl"))
			want := referenceRecords("sums", readings, sums, "sums", tc.sumsNew, cut, tc.pipeline == "sums")
			maps.Copy(want, referenceRecords("maxes", readings, tops, tc.newMaxes, tc.maxesNew, cut, tc.pipeline == "maxes"))
			got := committedByID(t, filepath.Join(dir, "out"))
			maps.Copy(got, committedByID(t, filepath.Join(dir, "peaks")))
			checkDefinitions(t, got, cut, tc.pipeline, tc.newMaxes)
			if len(got) != len(want) {
				t.Errorf("%d results, want %d", len(got), len(want))
			}
			bad := 0
			for _, id := range slices.Sorted(maps.Keys(want)) {
				if g := got[id]; g.values != want[id].values {
					if bad++; bad <= 5 {
						t.Errorf("%s: %q, want %q", id, g.values, want[id].values)
					}
				}
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					if bad++; bad <= 10 {
						t.Errorf("%s: not in the reference", id)
					}
				}
			}
		})
	}
}

// rollRecord is a result as compared: its aggregates, and its definition.
type rollRecord struct {
	values     string
	definition string
	start      int64
	pipeline   string
}

type rollReading struct {
	device string
	ts, v  int64
}

func readReadings(t *testing.T, path string) []rollReading {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rollReading
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Device string
			TS     int64
			V      int64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, rollReading{r.Device, r.TS, r.V})
	}
	return out
}

// referenceRecords computes the results of pipeline name: old's windows
// of the readings before cut, and the windows of next (named nextName,
// nil: none) of those from it; rolled false: old for every reading.
func referenceRecords(name string, rs []rollReading, old rollDef, nextName string, next *rollDef, cut int64, rolled bool) map[string]rollRecord {
	type agg struct{ n, sum, max, min int64 }
	type win struct {
		pipeline, key string
		start, end    int64
		def           *rollDef
	}
	wins := map[win]*agg{}
	for _, r := range rs {
		def, pipeline := &old, name
		if rolled && r.ts >= cut {
			if next == nil {
				continue
			}
			def = next
			if nextName != "" {
				pipeline = nextName
			}
		}
		if def.filter != nil && !def.filter(r.v) {
			continue
		}
		start := r.ts - r.ts%def.size
		w := win{pipeline, r.device, start, start + def.size, def}
		a := wins[w]
		if a == nil {
			a = &agg{max: r.v, min: r.v}
			wins[w] = a
		}
		a.n++
		a.sum += r.v
		a.max, a.min = max(a.max, r.v), min(a.min, r.v)
	}
	out := map[string]rollRecord{}
	for w, a := range wins {
		var vals string
		switch {
		case w.def.top:
			vals = fmt.Sprintf("top=%d", a.max)
		case w.def.min:
			vals = fmt.Sprintf("n=%d sum=%d max=%d min=%d", a.n, a.sum, a.max, a.min)
		default:
			vals = fmt.Sprintf("n=%d sum=%d max=%d", a.n, a.sum, a.max)
		}
		out[fmt.Sprintf("crash/%s/%s/%d-%d/0", w.pipeline, w.key, w.start, w.end)] = rollRecord{values: vals}
	}
	return out
}

// committedByID reads the committed results of an exactly-once file sink
// (committedRecords: each id once) by id.
func committedByID(t *testing.T, dir string) map[string]rollRecord {
	t.Helper()
	out := map[string]rollRecord{}
	for _, line := range committedRecords(t, dir) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, k := range []string{"n", "sum", "max", "min", "top"} {
			if v, ok := r[k]; ok {
				parts = append(parts, fmt.Sprintf("%s=%v", k, v))
			}
		}
		def, _ := r["definition"].(string)
		start, _ := r["window_start_ms"].(float64)
		out[r["id"].(string)] = rollRecord{values: strings.Join(parts, " "), definition: def, start: int64(start), pipeline: r["pipeline"].(string)}
	}
	return out
}

// checkDefinitions checks that every result names its definition, one
// per pipeline and side of the cut: the rolled pipeline's two differ.
func checkDefinitions(t *testing.T, got map[string]rollRecord, cut int64, rolled, renamed string) {
	t.Helper()
	defs := map[string]map[string]bool{}
	for _, r := range got {
		side := r.pipeline + " before"
		if r.start >= cut {
			side = r.pipeline + " from"
		}
		if r.definition == "" {
			t.Fatalf("a result of %s names no definition", r.pipeline)
		}
		if defs[side] == nil {
			defs[side] = map[string]bool{}
		}
		defs[side][r.definition] = true
	}
	for side, ds := range defs {
		if len(ds) != 1 {
			t.Errorf("results of %s the cut name %d definitions: %v", side, len(ds), ds)
		}
	}
	if rolled == "sums" {
		before, from := defs["sums before"], defs["sums from"]
		for d := range before {
			if from[d] {
				t.Errorf("results before and from the cut name the same definition %s", d)
			}
		}
	}
	if renamed != "" {
		for d := range defs["maxes before"] {
			if !defs[renamed+" from"][d] {
				t.Errorf("the renamed pipeline's definition is not the old one's %s: %v", d, defs[renamed+" from"])
			}
		}
	}
}

// TestRollover_IngestLogExactlyOnce adds an aggregate on a device whose
// readings came through the embedded broker: by a restart, the checkpoint
// taken while most of them wait in the ingest log, so the restore replays
// them into both definitions; or by SIGHUP to the running agent, most of
// them published after the reload. Run is SIGKILLed at random moments
// during the rollover. The committed results, each once, equal the reference: the
// old definition's windows before the cut, the new one's from it.
func TestRollover_IngestLogExactlyOnce(t *testing.T) {
	t.Parallel()
	t.Run("restart", func(t *testing.T) { rolloverIngest(t, false) })
	t.Run("SIGHUP", func(t *testing.T) { rolloverIngest(t, true) })
}

// rolloverIngest is TestRollover_IngestLogExactlyOnce with the change
// applied by a restart, validated first, or by SIGHUP to the running
// agent.
func rolloverIngest(t *testing.T, sighup bool) {
	t.Parallel()
	const devices, readings = 4, 6000
	addr := loopback.Addr(t)
	old := strings.Replace(embeddedCrashConfig(addr), `  admin       = "%ADMIN%"`, `  admin       = ""`, 1)
	old = strings.Replace(old, "  to = [sink.file.out]\n}", "  to = [sink.file.out]\n  debug_delay_per_record = \"500us\"\n}", 1)
	next := strings.Replace(old, "    sum = sum(event.v)\n", "    sum = sum(event.v)\n    min = min(event.v)\n", 1)
	dir := t.TempDir()

	// The old definition reads some of the readings, then is killed just
	// after a checkpoint: the rest wait in the ingest log. Its checkpoints
	// are 10 s apart (outside the pipeline block: not part of the
	// definition), so the one it restarts from is the first, taken before
	// the rest were published, however slowly a loaded machine publishes.
	first := old
	if !sighup {
		first = strings.Replace(old, `checkpoint { interval = "200ms" }`, `checkpoint { interval = "10s" }`, 1)
		if first == old {
			t.Fatal("the configuration's checkpoint interval moved")
		}
	}
	p := startEddy(t, "run", "-c", writeConfig(t, dir, first, "%CLIENT%", "unused"))
	sensor := newReconnectingSensor("tcp://"+addr, "rollover-sensor")
	if err := sensor.connect(); err != nil {
		t.Fatal(err)
	}
	base := int64(1_700_000_000_000)
	var rs []rollReading
	rng := rand.New(rand.NewPCG(21, 22))
	var topics, payloads []string
	for j := range readings {
		d := j % devices
		r := rollReading{device: "dev-" + strconv.Itoa(d), ts: base + int64(j)*5 + rng.Int64N(3000), v: int64(rng.IntN(100))}
		rs = append(rs, r)
		topics = append(topics, "sensors/"+strconv.Itoa(d)+"/telemetry")
		payloads = append(payloads, fmt.Sprintf(`{"device":%q,"ts":%d,"v":%d}`, r.device, r.ts, r.v))
	}
	if err := sensor.publish(topics[:readings/4], payloads[:readings/4]); err != nil {
		t.Fatal(err)
	}
	if !p.waitLog("checkpoint completed", 30*time.Second) {
		t.Fatal("no checkpoint within 30 s")
	}
	if !sighup {
		if err := sensor.publish(topics[readings/4:], payloads[readings/4:]); err != nil {
			t.Fatal(err)
		}
	}
	rolls := regexp.MustCompile(`roll over: aggregates changed \(min added\): its open windows finish as before; windows from (\S+) use the new aggregates`)
	var m []string
	path := ""
	if sighup {
		// The reload's checkpoint holds the first readings; the pipelines
		// restart on the new file from it, and the rest come after.
		path = writeConfig(t, dir, next, "%CLIENT%", "unused")
		p.signal(syscall.SIGHUP)
		if !p.waitLog(`msg="restore: pipeline \"sums\": roll over`, 30*time.Second) {
			t.Fatal("the reload does not roll the pipeline over")
		}
		if err := sensor.publish(topics[readings/4:], payloads[readings/4:]); err != nil {
			t.Fatal(err)
		}
		p.kill()
		sensor.close()
		if m = rolls.FindStringSubmatch(p.output()); m == nil {
			t.Fatalf("the reload logs no cut:\n%s", p.output())
		}
		m = append([]string{"", m[0]}, m[1:]...)
	} else {
		p.kill() // every reading is in the ingest log: acknowledged
		sensor.close()
		path = writeConfig(t, dir, next, "%CLIENT%", "unused")
		stdout, stderr, code := runSplit(t, "validate", "-c", path)
		m = regexp.MustCompile(`(?m)^  pipeline "sums": (` + rolls.String() + `)$`).FindStringSubmatch(stdout)
		if code != 0 || strings.Contains(stderr, "error") || m == nil {
			t.Fatalf("validate: exit %d, stderr %q:\n%s", code, stderr, stdout)
		}
	}
	cutAt, err := time.Parse(time.RFC3339Nano, m[2])
	if err != nil {
		t.Fatal(err)
	}
	cut := cutAt.UnixMilli()
	if cut >= base+readings*5 {
		t.Fatalf("the cut %s is after every reading: the checkpoint came too late to test a rollover", m[2])
	}

	rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	for kill := 0; kill < 2; kill++ {
		p := startEddy(t, "run", "-c", path)
		if kill == 0 && !sighup && !p.waitLog(`msg="restore: pipeline \"sums\": `+m[1]+`"`, 20*time.Second) {
			t.Fatal("run does not log what validate said")
		}
		// Killed while it replays the ingest log into both definitions
		// (about a second), or after: an idle run takes no checkpoint.
		if !p.waitLog("eddy started", 30*time.Second) {
			t.Fatal("run did not start within 30 s")
		}
		if p.wait(time.Duration(rng.Int64N(int64(time.Second)))) {
			t.Fatalf("run exited: %v", p.err)
		}
		p.kill()
	}
	want := referenceRecords("sums", rs, rollDef{size: 10_000}, "sums", &rollDef{size: 10_000, min: true}, cut, true)
	for id, r := range want { // these aggregates have no max
		r.values = regexp.MustCompile(` max=\d+`).ReplaceAllString(r.values, "")
		want[id] = r
	}
	p = startEddy(t, "run", "-c", path)
	flush := newReconnectingSensor("tcp://"+addr, "rollover-flush")
	if err := flush.connect(); err != nil {
		t.Fatal(err)
	}
	defer flush.close()
	if err := flush.publish([]string{"sensors/flush/telemetry"}, []string{fmt.Sprintf(`{"device":"flush","ts":%d,"v":0}`, base+readings*5+3_600_000)}); err != nil {
		t.Fatal(err)
	}
	var got map[string]rollRecord
	await.True(t, 60*time.Second, "every window committed", func() bool {
		got = committedByID(t, filepath.Join(dir, "out"))
		return len(got) >= len(want)
	})
	p.stop(syscall.SIGTERM, 20*time.Second)
	if p.err != nil {
		t.Fatalf("run exited with %v", p.err)
	}
	got = committedByID(t, filepath.Join(dir, "out"))
	checkDefinitions(t, got, cut, "sums", "")
	if len(got) != len(want) {
		t.Errorf("%d results, want %d", len(got), len(want))
	}
	bad := 0
	for id, w := range want {
		if g := got[id]; g.values != w.values {
			if bad++; bad <= 5 {
				t.Errorf("%s: %q, want %q", id, g.values, w.values)
			}
		}
	}
}
