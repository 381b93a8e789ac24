package e2e

// alarm through the real binary: the records are those a plain model of
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

// keyedAlarmConfig raises alarm "busy" when a device's state s has been
// "on" for 3 s, and clears it when s is "off" ("idle" holds it as it is).
var keyedAlarmConfig = replaceAll(keyedReportConfig, `  report_by_exception {
    value     = event.c
    deadband  = 20
    heartbeat = "10s"
  }`, `  alarm "busy" {
    raise        = event.s == "on"
    clear        = event.s == "off"
    min_duration = "3s"
  }`)

// TestKeyed_AlarmMatchesModel checks the records of the alarm pipeline
// against a model of the rules: late readings as in
// TestKeyed_ChangedMatchesModel; the others, per key in (time, line)
// order: an episode starts at an "on" reading, any other reading before
// the raise ends it, an "on" reading 3 s or more after its start raises;
// an "off" reading clears a raised alarm. Records come sorted by (time,
// key, seq) with id device/pipeline/key/busy/kind/time/seq.
func TestKeyed_AlarmMatchesModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := writeStateReadings(t, filepath.Join(dir, "in.jsonl"), 30, 200, 17)
	runToEndWith(t, dir, replaceAll(keyedAlarmConfig, "parallelism = 1", "parallelism = 2"))

	perKey, _ := onTimeByKey(in, nil)
	type rec struct {
		ID       string `json:"id"`
		Kind     string `json:"kind"`
		StartMs  int64  `json:"start_ms"`
		EndMs    int64  `json:"end_ms"`
		Duration int64  `json:"duration_ms"`
		S        string `json:"s"`
		ts       int64
		key      string
		seq      int
	}
	var want []rec
	for key, rs := range perKey {
		phase, since, seq := "normal", int64(0), 0
		add := func(kind string, r stateReading, w rec) {
			w.ID = fmt.Sprintf("kd/changes/%s/busy/%s/%d/%d", key, kind, r.TS, seq)
			w.Kind, w.S, w.ts, w.key, w.seq = kind, r.S, r.TS, key, seq
			want = append(want, w)
			seq++
		}
		for _, r := range rs {
			switch {
			case phase == "raised":
				if r.S == "off" {
					phase = "normal"
					add("cleared", r, rec{StartMs: since, EndMs: r.TS, Duration: r.TS - since})
				}
				continue
			case phase == "pending" && r.S != "on":
				phase = "normal"
				continue
			case phase == "normal":
				if r.S != "on" {
					continue
				}
				phase, since = "pending", r.TS
			}
			if r.TS >= since+3000 {
				phase = "raised"
				add("raised", r, rec{StartMs: since})
			}
		}
	}
	slices.SortFunc(want, func(a, b rec) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.key, b.key), cmp.Compare(a.seq, b.seq))
	})
	lines := committedRecords(t, filepath.Join(dir, "out"))
	if len(lines) != len(want) || len(want) == 0 {
		t.Fatalf("%d records, the model gives %d", len(lines), len(want))
	}
	for i, l := range lines {
		var got rec
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if got.ID != w.ID || got.Kind != w.Kind || got.StartMs != w.StartMs || got.EndMs != w.EndMs || got.Duration != w.Duration || got.S != w.S {
			t.Fatalf("record %d:\n%s\nwant %+v", i, l, w)
		}
	}
	t.Logf("%d readings: %d alarm records", len(in), len(lines))
}
