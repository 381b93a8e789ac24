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

// rollCase is one kind of change of TestRollover_ChangedPipelineExactlyOnce.
type rollCase struct {
	name string
	tmpl string // the changed configuration
	// pipeline is the one that rolls over, line what validate prints of
	// it with CUT for the cut; renamed is the rename's line.
	pipeline, line, renamed string
	// sumsNew and maxesNew are the definitions from the cut (nil: the
	// pipeline takes no reading from it); newMaxes is the name the maxes
	// pipeline has from the cut.
	sumsNew, maxesNew *rollDef
	newMaxes          string
}

// rollCases are the kinds of change the user's acceptance tests name,
// each a change of twoPipelines.
func rollCases() []rollCase {
	sums := rollDef{size: 10_000}
	tops := rollDef{size: 10_000, top: true}
	return []rollCase{
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
	}
}

// rollDevice is a device a rollover test changes the configuration of:
// where its readings come from, how it got its checkpoint and how the
// changed configuration runs to the end.
type rollDevice interface {
	// prepare leaves dir a device that ran twoPipelines (on this source)
	// and stopped with windows open in its checkpoint and readings after
	// it still to read, tc's change to come; it returns the changed
	// configuration's path.
	prepare(t *testing.T, dir string, tc rollCase) string
	// roll runs the changed configuration at path, SIGKILLed at random
	// moments during the rollover and restarted, until every result is
	// committed (done). The first start must log each of first. resumed
	// is what a start from a checkpoint taken during the rollover logs:
	// a device whose kill is sure to come before the rollover ends checks
	// it (a file's may come after its final checkpoint).
	roll(t *testing.T, path string, first []string, resumed string, done func() bool)
	// readings are every reading the device read, in order.
	readings(t *testing.T, dir string) []rollReading
}

// TestRollover_ChangedPipelineExactlyOnce changes a pipeline of a device
// that has a checkpoint with windows open and readings still to read, and
// checks, per kind of change and per source (a file; the embedded broker,
// whose readings wait in the ingest log): that validate says "roll over"
// with the change and the cut, word for word what run then logs, and
// exits 0; that run, SIGKILLed at random moments during the rollover and
// restarted, never exits with an error, and on the ingest log resumes the
// rollover with the same cut; and that the committed results, each exactly
// once, equal a reference computed from the same readings: the old
// definition's windows for the readings before the cut, the new one's for
// those from it, each result carrying its definition's hash.
func TestRollover_ChangedPipelineExactlyOnce(t *testing.T) {
	t.Parallel()
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		dev := fileDevice{base: checkpointOf(t, twoPipelines)}
		for _, tc := range rollCases() {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				rollOver(t, dev, tc)
			})
		}
	})
	t.Run("ingest log", func(t *testing.T) {
		t.Parallel()
		for _, tc := range rollCases() {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				rollOver(t, newIngestDevice(t), tc)
			})
		}
	})
}

// rollOver is one case of TestRollover_ChangedPipelineExactlyOnce on dev.
func rollOver(t *testing.T, dev rollDevice, tc rollCase) {
	dir := t.TempDir()
	path := dev.prepare(t, dir, tc)
	verdict, cut := validateRollover(t, path, tc)
	readings := dev.readings(t, dir)
	want := referenceFor(tc, readings, cut)
	dev.roll(t, path, verdict.logged, verdict.resumed, func() bool { return len(committedResults(t, dir)) >= len(want) })
	checkResults(t, committedResults(t, dir), want, cut, tc)
}

// rollVerdict is what validate said of a rollover, as run logs it.
type rollVerdict struct {
	logged  []string // the lines the first start logs
	resumed string   // the line a start that resumes the rollover logs
}

// validateRollover runs validate on the changed configuration at path,
// checks that it starts the rollover tc names, word for word, and returns
// the lines run must log and the cut.
func validateRollover(t *testing.T, path string, tc rollCase) (rollVerdict, int64) {
	t.Helper()
	stdout, stderr, code := runSplit(t, "validate", "-c", path)
	if code != 0 || strings.Contains(stderr, "error") {
		t.Fatalf("validate: exit %d, stderr %q; want 0: run starts\n%s", code, stderr, stdout)
	}
	line, cutText, cut := rolloverLine(t, stdout, tc.pipeline)
	if want := strings.ReplaceAll(tc.line, "CUT", cutText); line != want {
		t.Fatalf("validate says\n%s\nwant\n%s", line, want)
	}
	v := rollVerdict{logged: []string{restoreLogged(tc.pipeline, line)}}
	if tc.renamed != "" {
		renamed := strings.ReplaceAll(tc.renamed, "CUT", cutText)
		if l := fmt.Sprintf("  pipeline %q: %s\n", tc.newMaxes, renamed); !strings.Contains(stdout, l) {
			t.Fatalf("validate does not say\n%s:\n%s", l, stdout)
		}
		v.logged = append(v.logged, restoreLogged(tc.newMaxes, renamed))
	}
	// A restart from a checkpoint taken during the rollover resumes it
	// with the same cut.
	change, _, _ := strings.Cut(strings.TrimPrefix(line, "roll over: "), ": its open windows")
	resumed := "roll over (resumed): " + change + ": its open windows finish as before; windows from " + cutText + " use the new definition"
	if change == "removed from the configuration" {
		resumed = "roll over (resumed): " + change + ": its open windows finish as before, until " + cutText
	}
	v.resumed = restoreLogged(tc.pipeline, resumed)
	return v, cut
}

// rolloverLine finds what validate's output says of pipeline: a rollover,
// and its cut.
func rolloverLine(t *testing.T, stdout, pipeline string) (line, cutText string, cut int64) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  pipeline "` + pipeline + `": (roll over: .*)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("validate does not say pipeline %q rolls over:\n%s", pipeline, stdout)
	}
	cutText = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`).FindString(m[1])
	cutAt, err := time.Parse(time.RFC3339Nano, cutText)
	if err != nil {
		t.Fatalf("no cut in %q", m[1])
	}
	return m[1], cutText, cutAt.UnixMilli()
}

// restoreLogged is how run logs what a restore does to pipeline, text
// as validate prints it.
func restoreLogged(pipeline, text string) string {
	return fmt.Sprintf(`msg="restore: pipeline \"%s\": %s"`, pipeline, strings.ReplaceAll(text, `"`, `\"`))
}

// startLogging starts run on path and waits for each of lines in its log.
func startLogging(t *testing.T, path string, lines ...string) *eddyProc {
	t.Helper()
	p := startEddy(t, "run", "-c", path)
	for _, l := range lines {
		if !p.waitLog(l, 20*time.Second) {
			t.Fatalf("run does not log\n%s", l)
		}
	}
	return p
}

// referenceFor is the results tc's change must commit from readings, cut
// at cut.
func referenceFor(tc rollCase, readings []rollReading, cut int64) map[string]rollRecord {
	want := referenceRecords("sums", readings, rollDef{size: 10_000}, "sums", tc.sumsNew, cut, tc.pipeline == "sums")
	maps.Copy(want, referenceRecords("maxes", readings, rollDef{size: 10_000, top: true}, tc.newMaxes, tc.maxesNew, cut, tc.pipeline == "maxes"))
	return want
}

// committedResults are the results committed in dir's two exactly-once
// sinks, by id.
func committedResults(t *testing.T, dir string) map[string]rollRecord {
	got := committedByID(t, filepath.Join(dir, "out"))
	maps.Copy(got, committedByID(t, filepath.Join(dir, "peaks")))
	return got
}

// checkResults compares the committed results got with want, and checks
// the definitions they name.
func checkResults(t *testing.T, got, want map[string]rollRecord, cut int64, tc rollCase) {
	t.Helper()
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
}

// fileDevice reads its readings from a file: base is a device that ran
// twoPipelines on it until its first checkpoint (checkpointOf).
type fileDevice struct{ base string }

func (d fileDevice) prepare(t *testing.T, dir string, tc rollCase) string {
	copyTree(t, d.base, dir, "data", "in.jsonl")
	return writeConfig(t, dir, tc.tmpl)
}

// roll kills run twice, a random moment after a checkpoint of its own,
// then lets it run to the end of the file: a bounded file's old definition
// runs to the end, so every kill is during the rollover.
func (fileDevice) roll(t *testing.T, path string, first []string, _ string, _ func() bool) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for kill := 0; ; kill++ {
		var p *eddyProc
		if kill == 0 {
			p = startLogging(t, path, first...)
		} else {
			p = startLogging(t, path)
		}
		if kill == 2 {
			if !p.wait(2 * time.Minute) {
				t.Fatal("run did not end within 2 minutes")
			}
			if p.err != nil {
				t.Fatalf("run exited with %v", p.err)
			}
			return
		}
		if !p.waitLog("checkpoint completed", 30*time.Second) {
			t.Fatalf("no checkpoint within 30 s")
		}
		if p.wait(time.Duration(rng.Int64N(int64(300 * time.Millisecond)))) {
			if p.err != nil {
				t.Fatalf("run exited with %v", p.err)
			}
			return // it ended before the kill
		}
		p.kill()
	}
}

func (fileDevice) readings(t *testing.T, dir string) []rollReading {
	return readReadings(t, filepath.Join(dir, "in.jsonl"))
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

// TestRollover_ReloadExactlyOnce adds an aggregate by SIGHUP to a
// running agent whose readings come through the embedded broker, most of
// them published after the reload; run is then SIGKILLed at random
// moments during the rollover. The committed results, each once, equal
// the reference: the old definition's windows before the cut, the new
// one's from it. (A change applied by a restart, on readings waiting in
// the ingest log: TestRollover_ChangedPipelineExactlyOnce.)
func TestRollover_ReloadExactlyOnce(t *testing.T) {
	t.Parallel()
	const devices, readings = 4, 6000
	addr := loopback.Addr(t)
	old := strings.Replace(embeddedCrashConfig(addr), `  admin       = "%ADMIN%"`, `  admin       = ""`, 1)
	old = strings.Replace(old, "  to = [sink.file.out]\n}", "  to = [sink.file.out]\n  debug_delay_per_record = \"500us\"\n}", 1)
	next := strings.Replace(old, "    sum = sum(event.v)\n", "    sum = sum(event.v)\n    min = min(event.v)\n", 1)
	dir := t.TempDir()

	p := startEddy(t, "run", "-c", writeConfig(t, dir, old, "%CLIENT%", "unused"))
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
	// The reload's checkpoint holds the first readings; the pipelines
	// restart on the new file from it, and the rest come after.
	path := writeConfig(t, dir, next, "%CLIENT%", "unused")
	p.signal(syscall.SIGHUP)
	if !p.waitLog(`msg="restore: pipeline \"sums\": roll over`, 30*time.Second) {
		t.Fatal("the reload does not roll the pipeline over")
	}
	if err := sensor.publish(topics[readings/4:], payloads[readings/4:]); err != nil {
		t.Fatal(err)
	}
	p.kill()
	sensor.close()
	rolls := regexp.MustCompile(`roll over: aggregates changed \(min added\): its open windows finish as before; windows from (\S+) use the new aggregates`)
	m := rolls.FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("the reload logs no cut:\n%s", p.output())
	}
	cutAt, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	cut := cutAt.UnixMilli()
	if cut >= base+readings*5 {
		t.Fatalf("the cut %s is after every reading: the checkpoint came too late to test a rollover", m[1])
	}

	rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	for range 2 {
		p := startEddy(t, "run", "-c", path)
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
	checkResults(t, committedByID(t, filepath.Join(dir, "out")), want, cut, rollCase{pipeline: "sums"})
}
