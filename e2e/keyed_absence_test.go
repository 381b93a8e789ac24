package e2e

// absence through the real binary: the records are those a plain model of
// the rules gives, and a replay gives byte-identical output at
// parallelism 1 and 3 (TestKeyed_FileReplayIdenticalAtParallelism).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// keyedAbsenceConfig reports a device silent when it sent no reading
// other than "idle" for 4 s, and resumed when it sends one again.
var keyedAbsenceConfig = replaceAll(keyedReportConfig, `  report_by_exception {
    value     = event.c
    deadband  = 20
    heartbeat = "10s"
  }`, `  filter = event.s != "idle"
  absence {
    timeout = "4s"
    time    = "event"
  }`)

// TestKeyed_AbsenceMatchesModel checks the records of the absence pipeline
// against a model of the rules: late readings as in
// TestKeyed_ChangedMatchesModel; of the others, per key in (time, line)
// order, those that are not "idle": a reading 4 s or more after the
// previous one gives silent (at the previous one + 4 s) and resumed (at
// the reading); the end of the input makes every key silent 4 s after its
// last reading. Records come sorted by (time, key, seq).
func TestKeyed_AbsenceMatchesModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := writeStateReadings(t, filepath.Join(dir, "in.jsonl"), 30, 200, 23)
	runToEndWith(t, dir, replaceAll(keyedAbsenceConfig, "parallelism = 1", "parallelism = 2"))

	perKey, _ := onTimeByKey(in, func(r stateReading) bool { return r.S != "idle" })
	type rec struct {
		ID       string  `json:"id"`
		Kind     string  `json:"kind"`
		StartMs  int64   `json:"start_ms"`
		EndMs    int64   `json:"end_ms"`
		Duration int64   `json:"duration_ms"`
		S        *string `json:"s"`
		ts       int64
		key      string
		seq      int
	}
	var want []rec
	resumed := 0
	for key, rs := range perKey {
		seq := 0
		add := func(kind string, ts int64, w rec) {
			w.ID = fmt.Sprintf("kd/changes/%s/absence/%s/%d/%d", key, kind, ts, seq)
			w.Kind, w.ts, w.key, w.seq = kind, ts, key, seq
			want = append(want, w)
			seq++
		}
		for i, r := range rs {
			if i > 0 {
				if last := rs[i-1].TS; r.TS >= last+4000 {
					add("silent", last+4000, rec{StartMs: last})
					add("resumed", r.TS, rec{StartMs: last, EndMs: r.TS, Duration: r.TS - last, S: &r.S})
					resumed++
				}
			}
		}
		last := rs[len(rs)-1].TS
		add("silent", last+4000, rec{StartMs: last})
	}
	slices.SortFunc(want, func(a, b rec) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.key, b.key), cmp.Compare(a.seq, b.seq))
	})
	lines := committedRecords(t, filepath.Join(dir, "out"))
	if len(lines) != len(want) || resumed == 0 {
		t.Fatalf("%d records, the model gives %d (%d resumed)", len(lines), len(want), resumed)
	}
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	for i, l := range lines {
		var got rec
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if got.ID != w.ID || got.Kind != w.Kind || got.StartMs != w.StartMs || got.EndMs != w.EndMs || got.Duration != w.Duration || str(got.S) != str(w.S) {
			t.Fatalf("record %d:\n%s\nwant %+v s=%s", i, l, w, str(w.S))
		}
	}
	t.Logf("%d readings: %d absence records, %d resumed", len(in), len(lines), resumed)
}
