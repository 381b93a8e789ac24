package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/faultbroker"
)

// The agent's MQTT source against the fault broker (scripts/faultbroker),
// which re-sends, on the agent's reconnect after a SIGKILL, blocks of
// messages the agent already appended and acknowledged.

// readingGen makes the readings of the fault-broker tests: reading j is
// from device j%devices, stamped base + j×stepUs µs (so 50 µs is 20,000
// readings per second of event time) plus up to 999 ms of jitter, within
// mqttCrashConfig's 5 s of out-of-orderness. Every value is a function of
// j, so any range of readings can be published and counted again.
type readingGen struct {
	devices int
	stepUs  int64
}

const readingBase = int64(1_700_000_000_000)

func (g readingGen) ts(j int) int64 {
	return readingBase + int64(j)*g.stepUs/1000 + int64(j*7919%1000)
}

func (g readingGen) value(j int) int { return j * 104729 % 100 }

// message returns reading j's topic and payload.
func (g readingGen) message(j int) (string, []byte) {
	d := j % g.devices
	p := `{"device":"dev-` + strconv.Itoa(d) + `","ts":` + strconv.FormatInt(g.ts(j), 10) + `,"v":` + strconv.Itoa(g.value(j)) + `}`
	return "sensors/" + strconv.Itoa(d) + "/telemetry", []byte(p)
}

// flush is a reading an hour after reading n: its watermark fires every
// window of readings 0..n-1.
func (g readingGen) flush(n int) (string, []byte) {
	return "sensors/flush/telemetry", []byte(fmt.Sprintf(`{"device":"flush","ts":%d,"v":0}`, g.ts(n)+3_600_000))
}

// expected returns the windows of readings 0..n-1 as lastFirings keys
// them: "dev-D/start-end" → "n=N sum=S".
func (g readingGen) expected(n int) map[string]string {
	type acc struct{ n, sum int }
	m := map[string]*acc{}
	for j := range n {
		ts := g.ts(j)
		start := ts - ts%10000
		k := fmt.Sprintf("dev-%d/%v-%v", j%g.devices, float64(start), float64(start+10000))
		if m[k] == nil {
			m[k] = &acc{}
		}
		m[k].n++
		m[k].sum += g.value(j)
	}
	out := make(map[string]string, len(m))
	for k, a := range m {
		out[k] = fmt.Sprintf("n=%d sum=%d", a.n, a.sum)
	}
	return out
}

// publish publishes readings [from, to) through b's test API to its
// subscribers' queues, perSec a second (0: all at once).
func (g readingGen) publish(t *testing.T, b *faultbroker.Broker, from, to, perSec int) {
	t.Helper()
	const batch = 1000
	start := time.Now()
	for i := from; i < to; i += batch {
		for j := i; j < min(i+batch, to); j++ {
			b.Publish(g.message(j))
		}
		if perSec > 0 {
			if d := time.Duration(i+batch-from) * time.Second / time.Duration(perSec); d > time.Since(start) {
				time.Sleep(d - time.Since(start)) // pacing: the publisher's rate
			}
		}
	}
}

// waitAcked waits until the fault broker's session for client has n
// messages acknowledged.
func waitAcked(t *testing.T, b *faultbroker.Broker, client string, n int, d time.Duration) {
	t.Helper()
	await.True(t, d, `b.SessionStats(client).Acked >= n`, func() bool { return b.SessionStats(client).Acked >= n })
}

// withoutFlush drops the flush reading's window.
func withoutFlush(m map[string]string) map[string]string {
	for k := range m {
		if strings.HasPrefix(k, "flush/") {
			delete(m, k)
		}
	}
	return m
}

// oldestLogged returns the first offset the ingest log of source sensors
// still holds (its oldest segment's), 0 if none.
func oldestLogged(t *testing.T, dataDir string) uint64 {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dataDir, "ingest", "sensors", "*.log"))
	var first uint64
	for _, n := range names {
		v, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(n), ".log"), 10, 64)
		if err == nil && (first == 0 || v < first) {
			first = v
		}
	}
	return first
}

func startFaultBroker(t *testing.T) *faultbroker.Broker {
	t.Helper()
	b, err := faultbroker.Start(faultbroker.Options{Inflight: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

// TestResend_DupBlockCountedOnce: after a SIGKILL the broker re-sends,
// with DUP=1, the last 200,000 messages the agent appended and
// acknowledged (mosquitto did so with blocks of 65k–217k after
// reconnects), far more than the newest 65,536 entries. The readings are
// 20,000 per second of event time, so the block falls in windows still
// open: every window counts each reading once.
func TestResend_DupBlockCountedOnce(t *testing.T) {
	t.Parallel()
	const client, first, total, block = "eddy-resend-dup", 250_000, 300_000, 200_000
	g := readingGen{devices: 1000, stepUs: 50}
	b := startFaultBroker(t)
	run := newMQTTCrashRun(t, b.URL(), client)
	run.start()
	g.publish(t, b, 0, first, 0)
	waitAcked(t, b, client, first, 90*time.Second)
	run.kill()

	b.ResendOnReconnect(client, faultbroker.Resend{Last: block, Dup: true})
	run.start()
	g.publish(t, b, first, total, 0)
	b.Publish(g.flush(total))
	want := g.expected(total)
	got := withoutFlush(run.finalResults(len(want)))
	if st := b.SessionStats(client); st.Resent != block {
		t.Fatalf("broker re-sent %d messages, want %d", st.Resent, block)
	}
	sameWindows(t, want, got, 1)
	t.Logf("%d readings, a re-sent DUP block of %d: %d windows, each reading counted once", total, block, len(want))
}

// resendOldConfig is mqttCrashConfig with an ingest log of 16 MiB (4
// segments of 4 MiB, uncompressed, about 50,000 readings each), so
// checkpoints let it drop the oldest readings well before it is full.
var resendOldConfig = strings.Replace(mqttCrashConfig, "checkpoint {", `ingest {
  max_disk    = "16MiB"
  compression = "none"
}
checkpoint {`, 1)

// TestResend_BlockOlderThanLogUnmatched: after a SIGKILL the broker
// re-sends, with DUP=1, a block of 20,000 acknowledged messages older than
// anything the agent's ingest log still holds. Nothing can recognize them:
// they are kept, counted in eddy_ingest_redeliveries_unmatched_total, and
// logged; their readings are long behind the watermark, so no window
// counts them twice.
func TestResend_BlockOlderThanLogUnmatched(t *testing.T) {
	t.Parallel()
	const client, first, total, block = "eddy-resend-old", 150_000, 160_000, 20_000
	g := readingGen{devices: 100, stepUs: 5000} // 200 readings per second of event time
	b := startFaultBroker(t)
	run := newCrashRun(t, resendOldConfig, "%BROKER%", b.URL(), "%CLIENT%", client)
	run.start()
	g.publish(t, b, 0, first, 0)
	waitAcked(t, b, client, first, 90*time.Second)
	// The broker's delivery sequence is the log's offset here (one
	// connection, nothing dropped): wait until the log has let the block go.
	await.True(t, 60*time.Second, `oldestLogged(t, filepath.Join(run.dir, "data")) > 2*block`, func() bool { return oldestLogged(t, filepath.Join(run.dir, "data")) > 2*block })
	run.kill()

	b.ResendOnReconnect(client, faultbroker.Resend{From: 1, Count: block, Dup: true})
	run.start()
	g.publish(t, b, first, total, 0)
	b.Publish(g.flush(total))
	want := g.expected(total)
	run.waitResults(len(want))
	if v := metricValue(t, run.admin, `eddy_ingest_redeliveries_unmatched_total{source="sensors"}`); v < block || v > block+1000 {
		t.Errorf("eddy_ingest_redeliveries_unmatched_total = %v, want %d (+ at most the in-flight window)", v, block)
	}
	if !run.p.waitLog("match nothing in the log", 10*time.Second) {
		t.Error("no log line about the unmatched redeliveries")
	}
	got := withoutFlush(run.finalResults(len(want)))
	sameWindows(t, want, got, 1)
	t.Logf("%d readings, a re-sent DUP block of %d older than the log: %d windows, each reading counted once", total, block, len(want))
}
