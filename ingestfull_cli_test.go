package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ingestFullConfig is mqttCrashConfig with a small ingest log (1 MiB: four
// segments of 256 KiB, about 10,000 readings uncompressed) and the default
// checkpoint interval of 10 s.
var ingestFullConfig = replaceAll(mqttCrashConfig,
	`checkpoint { interval = "200ms" }`, `ingest {
  max_disk    = "1MiB"
  compression = "none"
}
checkpoint { interval = "%INTERVAL%" }`)

// TestIngestFull_BurstLargerThanLogDrains: the broker holds a burst of
// 150,000 readings, about fifteen times what the 1 MiB ingest log holds.
// The log fills, the agent holds messages unacked, and must shrink the log
// and go on until every reading is counted once.
func TestIngestFull_BurstLargerThanLogDrains(t *testing.T) {
	t.Parallel()
	const client, total = "eddy-ingest-full", 150_000
	g := readingGen{devices: 100, stepUs: 5000}
	b := startFaultBroker(t)
	run := newCrashRun(t, ingestFullConfig, "%BROKER%", b.URL(), "%CLIENT%", client, "%INTERVAL%", "10s")
	run.start()
	g.publish(t, b, 0, total, 0)
	b.Publish(g.flush(total))
	if !run.p.waitLog("ingest log full", 30*time.Second) {
		t.Fatal("the ingest log never filled")
	}
	waitAcked(t, b, client, total+1, 50*time.Second)
	want := g.expected(total)
	got := withoutFlush(run.finalResults(len(want)))
	sameWindows(t, want, got, 0)
	out := run.p.output()
	full := strings.Index(out, "ingest log full: holding messages unacked")
	if resumes := strings.LastIndex(out, "ingest log has room again: ingest resumes"); resumes < full {
		t.Error("the warning that the log is full is not followed by a line saying ingest resumes")
	}
	t.Logf("oldest offset kept %d; %d fills", oldestLogged(t, filepath.Join(run.dir, "data")), strings.Count(out, "ingest log full: holding"))
}
