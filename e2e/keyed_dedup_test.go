package e2e

// dedup through the real binary: the readings that pass are those a plain
// model of the rule picks, and a replay gives byte-identical output at
// parallelism 1 and 3 (TestKeyed_FileReplayIdenticalAtParallelism).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// keyedDedupConfig forwards a device's reading unless its counter c
// repeats one that passed less than 5 s before.
var keyedDedupConfig = replaceAll(keyedReportConfig, `  report_by_exception {
    value     = event.c
    deadband  = 20
    heartbeat = "10s"
  }`, `  dedup {
    id     = event.c
    within = "5s"
  }`)

// TestKeyed_DedupMatchesModel checks the records of the dedup pipeline
// against a model of the rule: late readings as in
// TestKeyed_ChangedMatchesModel; the others, per key in (time, line)
// order, pass unless a reading with the same c passed less than 5 s
// before. Records are reading records sorted by (time, key, line).
func TestKeyed_DedupMatchesModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := writeStateReadings(t, filepath.Join(dir, "in.jsonl"), 30, 200, 19)
	runToEndWith(t, dir, replaceAll(keyedDedupConfig, "parallelism = 1", "parallelism = 2"))

	perKey, _ := onTimeByKey(in, nil)
	var want []stateReading
	dropped := 0
	for _, rs := range perKey {
		passed, n := dedupModel(rs, 5000)
		want = append(want, passed...)
		dropped += n
	}
	slices.SortFunc(want, func(a, b stateReading) int {
		return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(a.Device, b.Device), cmp.Compare(a.line, b.line))
	})
	lines := committedRecords(t, filepath.Join(dir, "out"))
	if len(lines) != len(want) || dropped == 0 {
		t.Fatalf("%d records, the model gives %d (%d dropped)", len(lines), len(want), dropped)
	}
	for i, l := range lines {
		var got struct {
			ID, Kind, S string
		}
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if id := fmt.Sprintf("kd/changes/%s/%d/%d", w.Device, w.TS, w.line); got.ID != id || got.Kind != "reading" || got.S != w.S {
			t.Fatalf("record %d:\n%s\nwant id %s s=%s", i, l, id, w.S)
		}
	}
	t.Logf("%d readings: %d passed, %d dropped", len(in), len(lines), dropped)
}

// dedupModel returns the readings of one key, in its order, that pass a
// dedup of c within ms (none with the same c passed less than within
// before), and the number dropped.
func dedupModel(rs []stateReading, within int64) (passed []stateReading, dropped int) {
	seen := map[int]int64{}
	for _, r := range rs {
		if t, ok := seen[r.C]; ok && r.TS < t+within {
			dropped++
			continue
		}
		seen[r.C] = r.TS
		passed = append(passed, r)
	}
	return passed, dropped
}
