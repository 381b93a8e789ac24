package main

// The crash test of absence on processing time: its records' times are
// the agent's clock, which differs from run to run, so the output is
// compared by its set of transitions, not byte for byte.

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// procAbsenceCrashConfig is keyedCrashConfig with absence on processing
// time (the default) instead of the functions, over the readings with
// v < 500. The timeout (5 min) outlasts the replay and any restart, so no
// key falls silent during it: the end of the input makes every key silent
// once, after its last such reading, in every run.
var procAbsenceCrashConfig = replaceAll(keyedCrashConfig, `  filter = changed(event.v >= 990)
  map {
    high = event.v >= 990
    was  = prev(event.v)
    d    = delta(event.v)
    n    = count_key()
  }
  state_ttl = "3s"`, `  filter = event.v < 500
  absence { timeout = "5m" }`)

// TestCrash_ProcessingTimeAbsence kills the binary at random moments while
// a processing-time absence pipeline runs beside the window pipeline
// (crashFileSource): the processing-time timers and the readings' offsets
// they name are restored from the checkpoints, and the committed
// silent/resumed transitions, per key, are the uninterrupted run's, each
// once (one id per transition).
func TestCrash_ProcessingTimeAbsence(t *testing.T) {
	crashFileSource(t, procAbsenceCrashConfig, false, sameTransitions)
}

// sameTransitions checks that got and want hold the same transitions: the
// same set of (key, kind, the reading the id names), every silence lasting
// the timeout.
func sameTransitions(t *testing.T, got, want []string) {
	t.Helper()
	g, w := transitions(t, got), transitions(t, want)
	if len(w) < 900 {
		t.Fatalf("the uninterrupted run reported %d transitions, want one silence for about each of the 1000 keys", len(w))
	}
	if !slices.Equal(g, w) {
		i := 0
		for i < min(len(g), len(w)) && g[i] == w[i] {
			i++
		}
		t.Fatalf("transitions after the kills differ from the uninterrupted run: %d vs %d; first difference at %d: %v, want %v",
			len(g), len(w), i, g[i:min(i+3, len(g))], w[i:min(i+3, len(w))])
	}
	t.Logf("%d transitions, the same after the kills", len(w))
}

// transitions returns the sorted "key kind o<offset>/<n>" of the absence
// records in lines.
func transitions(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var r signalRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "silent" && r.TimeMs-r.StartMs != 5*60*1000 {
			t.Fatalf("silent record %s: want time = start + 5 min", l)
		}
		if !strings.HasPrefix(r.ID, "crash/changes/"+r.Key+"/absence/"+r.Kind+"/o") {
			t.Fatalf("record %s: want a processing-time absence id", l)
		}
		out = append(out, r.Key+" "+r.Kind+" "+idFrom(r.ID))
	}
	slices.Sort(out)
	return out
}
