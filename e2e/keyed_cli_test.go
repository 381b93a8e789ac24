package e2e

// Per-key functions through the real binary: a file replay gives
// byte-identical output at parallelism 1 and 3, and the readings a
// changed() filter passes are those a plain model of the rules picks.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stateReading is one line of writeStateReadings' input.
type stateReading struct {
	Device string `json:"device"`
	TS     int64  `json:"ts"`
	S      string `json:"s"`
	C      int    `json:"c"`
	line   uint64
}

// writeStateReadings writes devices × perDevice readings, out of order
// within a 4 s jitter (under the 5 s bound), whose state s flips now and
// then and whose counter c grows with an occasional reset; every 400th line
// is stamped 30 s in the past, behind the watermark.
func writeStateReadings(t *testing.T, path string, devices, perDevice int, seed uint64) []stateReading {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	base := int64(1_700_000_000_000)
	states := make([]string, devices)
	counters := make([]int, devices)
	var out []stateReading
	var b strings.Builder
	for i := 0; i < perDevice; i++ {
		for d := 0; d < devices; d++ {
			if states[d] == "" || rng.IntN(4) == 0 {
				states[d] = []string{"on", "off", "idle"}[rng.IntN(3)]
			}
			counters[d] += rng.IntN(10)
			if rng.IntN(40) == 0 {
				counters[d] = rng.IntN(3)
			}
			r := stateReading{Device: fmt.Sprintf("dev-%d", d), TS: base + int64(i)*1000 + rng.Int64N(4000), S: states[d], C: counters[d]}
			r.line = uint64(len(out) + 1)
			if r.line%400 == 0 {
				r.TS -= 30_000
			}
			line, _ := json.Marshal(r)
			b.Write(line)
			b.WriteByte('\n')
			out = append(out, r)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

const keyedConfig = `
agent {
  device_id   = "kd"
  data_dir    = "%DATA%"
  admin       = ""
  parallelism = 1
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
sink "file" "late" {
  path     = "%DIR%/late"
  delivery = "exactly_once"
}
pipeline "changes" {
  from   = source.file.in
  key    = event.device
  filter = changed(event.s)
  map {
    s      = event.s
    was    = prev(event.c)
    d      = delta(event.c)
    n      = count_key()
    first  = first_seen()
  }
  to          = [sink.file.out]
  late_output = sink.file.late
}
checkpoint {
  interval = "100ms"
}
`

// keyedWindowConfig feeds a changed() filter and delta() into a window.
var keyedWindowConfig = replaceAll(keyedConfig, `  map {
    s      = event.s
    was    = prev(event.c)
    d      = delta(event.c)
    n      = count_key()
    first  = first_seen()
  }`, `  window "tumbling" { size = "10s" }
  aggregate {
    changes = count()
    counted = sum(delta(event.c))
  }`)

// onTimeByKey returns the readings of in that are not late (their time is
// after the watermark they arrived with: max time so far − 5 s − 1) and
// pass keep, per key in (time, line) order, and the number of late ones.
func onTimeByKey(in []stateReading, keep func(stateReading) bool) (perKey map[string][]stateReading, late int) {
	maxTS := int64(math.MinInt64)
	perKey = map[string][]stateReading{}
	for _, r := range in {
		wm := int64(math.MinInt64)
		if maxTS != math.MinInt64 {
			wm = maxTS - 5000 - 1
		}
		maxTS = max(maxTS, r.TS)
		if r.TS <= wm {
			late++
			continue
		}
		if keep == nil || keep(r) {
			perKey[r.Device] = append(perKey[r.Device], r)
		}
	}
	for _, rs := range perKey {
		slices.SortFunc(rs, func(a, b stateReading) int { return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(a.line, b.line)) })
	}
	return perKey, late
}

// rawRecords returns the committed output of an exactly-once file sink
// directory as bytes, part files in order.
func rawRecords(t *testing.T, dir string) []byte {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	slices.Sort(names)
	var all []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestKeyed_FileReplayIdenticalAtParallelism replays one file through a
// changed() pipeline without a window, one feeding a window, a
// report_by_exception pipeline, an alarm, a dedup and an absence pipeline,
// each at
// parallelism 1 and 3: the committed outputs (and late outputs) must be
// byte-identical.
func TestKeyed_FileReplayIdenticalAtParallelism(t *testing.T) {
	t.Parallel()
	input := filepath.Join(t.TempDir(), "in.jsonl")
	writeStateReadings(t, input, 50, 200, 3)
	for name, tmpl := range map[string]string{"readings": keyedConfig, "window": keyedWindowConfig, "report_by_exception": keyedReportConfig, "alarm": keyedAlarmConfig, "dedup": keyedDedupConfig, "absence": keyedAbsenceConfig} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var outs, lates [][]byte
			for _, par := range []string{"1", "3"} {
				dir := t.TempDir()
				if err := os.Link(input, filepath.Join(dir, "in.jsonl")); err != nil {
					t.Fatal(err)
				}
				runToEndWith(t, dir, replaceAll(tmpl, "parallelism = 1", "parallelism = "+par))
				committedRecords(t, filepath.Join(dir, "out")) // fails on a duplicated id
				outs = append(outs, rawRecords(t, filepath.Join(dir, "out")))
				lates = append(lates, rawRecords(t, filepath.Join(dir, "late")))
			}
			if len(outs[0]) == 0 || len(lates[0]) == 0 {
				t.Fatalf("output %d bytes, late %d bytes: want both", len(outs[0]), len(lates[0]))
			}
			if string(outs[0]) != string(outs[1]) {
				t.Fatalf("parallelism 1 and 3 differ: %d vs %d bytes", len(outs[0]), len(outs[1]))
			}
			if string(lates[0]) != string(lates[1]) {
				t.Fatalf("late outputs at parallelism 1 and 3 differ: %d vs %d bytes", len(lates[0]), len(lates[1]))
			}
		})
	}
}

// TestKeyed_ChangedMatchesModel checks the records of the changed()
// pipeline against a model of the rules: a reading is late when its time
// is not after the watermark it arrived with (max time so far − 5 s − 1);
// the others, per key in (time, line) order, pass the filter when s
// differs from the key's previous reading's (or at the first); records
// come sorted by (time, key, line); prev, delta, count_key and first_seen
// are those of the passed readings.
func TestKeyed_ChangedMatchesModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := writeStateReadings(t, filepath.Join(dir, "in.jsonl"), 30, 200, 11)
	runToEndWith(t, dir, replaceAll(keyedConfig, "parallelism = 1", "parallelism = 2"))

	perKey, late := onTimeByKey(in, nil)
	type rec struct {
		ID    string   `json:"id"`
		S     string   `json:"s"`
		Was   *float64 `json:"was"`
		D     *float64 `json:"d"`
		N     float64  `json:"n"`
		First float64  `json:"first"`
		ts    int64
		key   string
		line  uint64
	}
	var want []rec
	for key, rs := range perKey {
		var prevS string
		var prevC *float64
		var n, first float64
		for i, r := range rs {
			if i > 0 && r.S == prevS {
				continue
			}
			prevS = r.S
			c := float64(r.C)
			w := rec{ID: fmt.Sprintf("kd/changes/%s/%d/%d", key, r.TS, r.line), S: r.S, Was: prevC, ts: r.TS, key: key, line: r.line}
			if prevC != nil {
				d := c - *prevC
				if c < *prevC {
					d = c
				}
				w.D = &d
			}
			n++
			if n == 1 {
				first = float64(r.TS)
			}
			w.N, w.First = n, first
			prevC = &c
			want = append(want, w)
		}
	}
	slices.SortFunc(want, func(a, b rec) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.key, b.key), cmp.Compare(a.line, b.line))
	})
	lines := committedRecords(t, filepath.Join(dir, "out"))
	if len(lines) != len(want) {
		t.Fatalf("%d records, the model gives %d", len(lines), len(want))
	}
	num := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	for i, l := range lines {
		var got rec
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if got.ID != w.ID || got.S != w.S || num(got.Was) != num(w.Was) || num(got.D) != num(w.D) || got.N != w.N || got.First != w.First {
			t.Fatalf("record %d:\n%s\nwant id %s s=%s was=%s d=%s n=%v first=%v", i, l, w.ID, w.S, num(w.Was), num(w.D), w.N, w.First)
		}
	}
	lateLines := strings.Count(string(rawRecords(t, filepath.Join(dir, "late"))), "\n")
	if lateLines != late || late == 0 {
		t.Fatalf("%d late records, the model gives %d", lateLines, late)
	}
	t.Logf("%d readings: %d records, %d late", len(in), len(lines), late)
}
