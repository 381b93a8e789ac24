package e2e

// report_by_exception through the real binary: the records are those a
// plain model of the rules picks, and a replay gives byte-identical output
// at parallelism 1 and 3 (TestKeyed_FileReplayIdenticalAtParallelism).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// keyedReportConfig reports each device's counter c on a change of 20 or
// more, or every 10 s of readings, with the state s of the reading.
var keyedReportConfig = replaceAll(keyedConfig, `  filter = changed(event.s)
  map {
    s      = event.s
    was    = prev(event.c)
    d      = delta(event.c)
    n      = count_key()
    first  = first_seen()
  }`, `  report_by_exception {
    value     = event.c
    deadband  = 20
    heartbeat = "10s"
  }
  map {
    s = event.s
  }`)

// TestKeyed_ReportByExceptionMatchesModel checks the records of the
// report_by_exception pipeline against a model of the rules: late readings
// as in TestKeyed_ChangedMatchesModel; the others, per key in (time, line)
// order, are reported at the key's first reading, when c moved 20 or more
// from the last reported c, or 10 s after the last report; records come
// sorted by (time, key, seq) with id device/pipeline/key/block/kind/time/seq.
func TestKeyed_ReportByExceptionMatchesModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := writeStateReadings(t, filepath.Join(dir, "in.jsonl"), 30, 200, 13)
	runToEndWith(t, dir, replaceAll(keyedReportConfig, "parallelism = 1", "parallelism = 2"))

	perKey, late := onTimeByKey(in, nil)
	type rec struct {
		ID    string  `json:"id"`
		Kind  string  `json:"kind"`
		Value float64 `json:"value"`
		S     string  `json:"s"`
		ts    int64
		key   string
		seq   int
	}
	var want []rec
	for key, rs := range perKey {
		var last, lastTS int64
		seq := 0
		for i, r := range rs {
			c := int64(r.C)
			if i > 0 && max(c-last, last-c) < 20 && r.TS < lastTS+10_000 {
				continue
			}
			last, lastTS = c, max(lastTS, r.TS)
			want = append(want, rec{ID: fmt.Sprintf("kd/changes/%s/report_by_exception/report/%d/%d", key, r.TS, seq),
				Kind: "report", Value: float64(c), S: r.S, ts: r.TS, key: key, seq: seq})
			seq++
		}
	}
	slices.SortFunc(want, func(a, b rec) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.key, b.key), cmp.Compare(a.seq, b.seq))
	})
	lines := committedRecords(t, filepath.Join(dir, "out"))
	if len(lines) != len(want) {
		t.Fatalf("%d records, the model gives %d", len(lines), len(want))
	}
	for i, l := range lines {
		var got rec
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if got.ID != w.ID || got.Kind != w.Kind || got.Value != w.Value || got.S != w.S {
			t.Fatalf("record %d:\n%s\nwant id %s value=%v s=%s", i, l, w.ID, w.Value, w.S)
		}
	}
	lateLines := strings.Count(string(rawRecords(t, filepath.Join(dir, "late"))), "\n")
	if lateLines != late || late == 0 {
		t.Fatalf("%d late records, the model gives %d", lateLines, late)
	}
	t.Logf("%d readings: %d reports, %d late", len(in), len(lines), late)
}
