package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ingestFullConfig is mqttCrashConfig with a small ingest log: 1 MiB, four
// segments of 256 KiB, about 10,000 of readingGen's readings uncompressed;
// checkpoints every %INTERVAL%.
var ingestFullConfig = replaceAll(mqttCrashConfig,
	`checkpoint { interval = "200ms" }`, `ingest {
  max_disk    = "1MiB"
  compression = "none"
}
checkpoint { interval = "%INTERVAL%" }`)

// TestIngestFull_BurstLargerThanLogDrains: the broker holds a burst of
// 150,000 readings, about fifteen times what the 1 MiB ingest log holds,
// and checkpoints are at the default interval of 10 s. The log fills again
// and again; each time the agent holds messages unacked, says so, takes a
// checkpoint as soon as its pipelines have read the log to its end (not
// after the interval, and although nothing else arrives), truncates the
// log below it, and says ingest resumes. Every reading is acknowledged at
// the broker well within the time its dozen fills would take at one per
// interval, and every window counts each reading once. (Before, the log
// was truncated only below the oldest of the 3 retained checkpoints, and
// with the intake held the checkpoints were skipped as idle: the agent
// stalled for good after the first fill.)
func TestIngestFull_BurstLargerThanLogDrains(t *testing.T) {
	t.Parallel()
	const client, total = "eddy-ingest-full", 150_000
	g := readingGen{devices: 100, stepUs: 5000}
	b := startFaultBroker(t)
	run := newCrashRun(t, ingestFullConfig, "%BROKER%", b.URL(), "%CLIENT%", client, "%INTERVAL%", "10s")
	run.start()
	g.publish(t, b, 0, total, 0)
	b.Publish(g.flush(total))
	if !run.p.waitLog("ingest log full: holding messages unacked", 30*time.Second) {
		t.Fatal("the ingest log never filled")
	}
	waitAcked(t, b, client, total+1, 45*time.Second)
	if first := oldestLogged(t, filepath.Join(run.dir, "data")); first < total/2 {
		t.Errorf("the ingest log still holds offset %d of %d: it did not shrink", first, total+1)
	}
	want := g.expected(total)
	got := withoutFlush(run.finalResults(len(want)))
	sameWindows(t, want, got, 0)
	out := run.p.output()
	fills := strings.Count(out, "ingest log full: holding messages unacked")
	if resumes := strings.Count(out, "ingest log has room again: ingest resumes"); fills < 2 || resumes != fills {
		t.Errorf("%d lines saying the ingest log is full, %d saying ingest resumes: want several, each followed by one", fills, resumes)
	}
	if last, resumes := strings.LastIndex(out, "ingest log full: holding"), strings.LastIndex(out, "ingest resumes"); resumes < last {
		t.Error("the last line saying the log is full is not followed by one saying ingest resumes")
	}
	t.Logf("%d readings through a 1 MiB ingest log: %d fills", total, fills)
}

// TestIngestFull_LargeReadingsDrain: readings of 8 KiB, so that one batch
// of the MQTT source (up to 512 messages, 4 MiB) is larger than the whole
// 1 MiB ingest log. Such a batch would wait for room the log can never
// have however far it is truncated; the intake appends it in parts the log
// can always take. The log fills, and every reading is acknowledged and
// counted once.
func TestIngestFull_LargeReadingsDrain(t *testing.T) {
	t.Parallel()
	const client, total = "eddy-ingest-full-large", 5_000
	g := readingGen{devices: 100, stepUs: 5000}
	pad := `,"pad":"` + strings.Repeat("x", 8192) + `"}`
	b := startFaultBroker(t)
	run := newCrashRun(t, ingestFullConfig, "%BROKER%", b.URL(), "%CLIENT%", client, "%INTERVAL%", "1s")
	run.start()
	for j := range total {
		topic, payload := g.message(j)
		b.Publish(topic, append(payload[:len(payload)-1:len(payload)-1], pad...))
	}
	b.Publish(g.flush(total))
	waitAcked(t, b, client, total+1, 45*time.Second)
	want := g.expected(total)
	got := withoutFlush(run.finalResults(len(want)))
	sameWindows(t, want, got, 0)
	out := run.p.output()
	fills := strings.Count(out, "ingest log full: holding messages unacked")
	if resumes := strings.Count(out, "ingest log has room again: ingest resumes"); fills == 0 || resumes != fills {
		t.Errorf("%d lines saying the ingest log is full, %d saying ingest resumes: want some, each followed by one", fills, resumes)
	}
}
