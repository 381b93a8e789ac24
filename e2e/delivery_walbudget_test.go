package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// expectedWindows computes, from the readings publishReadings sends, the
// result of every 10 s window per device: "n=… sum=…" by "dev/start-end".
func expectedWindows(readings, devices int) map[string]string {
	rng := rand.New(rand.NewPCG(11, 12))
	base := int64(1_700_000_000_000)
	type acc struct{ n, sum int }
	m := map[string]*acc{}
	for j := 0; j < readings; j++ {
		d := j % devices
		ts := base + int64(j)*5 + rng.Int64N(3000)
		v := rng.IntN(100)
		start := ts - ((ts%10000)+10000)%10000
		k := fmt.Sprintf("dev-%d/%v-%v", d, float64(start), float64(start+10000))
		if m[k] == nil {
			m[k] = &acc{}
		}
		m[k].n++
		m[k].sum += v
	}
	out := map[string]string{}
	for k, a := range m {
		out[k] = fmt.Sprintf("n=%d sum=%d", a.n, a.sum)
	}
	return out
}

func metricValue(t *testing.T, admin, name string) float64 {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return -1
}

// TestWALSink_DiskBudgetBlocks: with the upstream broker unreachable, the
// exactly-once sink's WAL fills to buffer.max_disk and then blocks: the
// pipeline stops (backpressure) and the ingest log absorbs what keeps
// coming, until it too is full and sensor messages wait unacked at their
// broker. When the uplink returns, the pipeline resumes by itself and every
// result is delivered exactly once. (It used to stall there about one run
// in three under load: see TestSink_BlockNeverWaitsOnUncommittedOnly
// and TestSinkRunner_HoldsEarlyEpochs for the mechanism.)
func TestWALSink_DiskBudgetBlocks(t *testing.T) {
	for _, u := range mosquittoUpstreams() {
		t.Run(u.name, func(t *testing.T) { testDiskBudgetBlocks(t, u) })
	}
}

func testDiskBudgetBlocks(t *testing.T, u upstreamBroker) {
	const readings, devices = 100000, 1000
	in := mosquitto.Start(t)
	up := mosquitto.Start(t, u.opts...)
	col := newCollector(t, up.URL(), "results/#") // persistent session, kept while the broker is down
	up.Stop()

	tmpl := strings.Replace(u.withWindow(walCrashConfig), `delivery = "exactly_once"`, `delivery = "exactly_once"
  buffer {
    max_disk  = "1MiB"
    when_full = "block"
  }`, 1) + `
ingest { max_disk = "2MiB" }
`
	// The outage outlasts (tolerable_failures + 1) × timeout: checkpoints
	// must wait for the uplink, not time out and fail the run.
	tmpl = strings.Replace(tmpl, `checkpoint { interval = "200ms" }`, `checkpoint {
  interval           = "200ms"
  timeout            = "3s"
  tolerable_failures = 1
}`, 1)
	r := newCrashRun(t, tmpl, "%DEVICE%", "budget", "%BROKER%", in.URL(), "%UPSTREAM%", up.URL())
	admin := r.admin
	r.start()
	published := make(chan error, 1)
	go func() { published <- sendReadings(in.URL(), "pub-budget", readings, devices, func(int) {}) }()

	// The WAL reaches its budget and holds there; the pipeline stops: the
	// count of readings taken in stays the same for 2 s. (Until the sink
	// blocks, the channels between the stages still take readings in, for
	// longer the more loaded the machine is.)
	const budget = 1 << 20
	var readIn float64
	stableSince := time.Now()
	await.True(t, 5*time.Minute, `time.Since(stableSince) >= 2*time.Second`, func() bool { // a bound for a hung run; a loaded machine takes minutes
		n := metricValue(t, admin, `eddy_readings_in_total{pipeline="sums"}`)
		if n != readIn || metricValue(t, admin, `eddy_wal_backlog_bytes{sink="cloud"}`) <= budget/2 {
			readIn, stableSince = n, time.Now()
			return false
		}
		return time.Since(stableSince) >= 2*time.Second
	})
	if v := metricValue(t, admin, `eddy_wal_write_blocked{sink="cloud"}`); v != 1 {
		t.Fatalf("the pipeline stopped with eddy_wal_write_blocked = %v, want 1: not held by the sink", v)
	}
	walBytes := metricValue(t, admin, `eddy_wal_disk_bytes{sink="cloud"}`)
	if readIn >= readings {
		t.Fatalf("all %d readings were processed: the sink did not block", readings)
	}
	// Up to one checkpoint interval of uncommitted output may exceed the
	// budget (it must be accepted for the checkpoint to complete).
	if walBytes > 2*budget {
		t.Fatalf("WAL at %v bytes, budget %d", walBytes, budget)
	}
	t.Logf("blocked: WAL %v bytes, %v of %d readings processed, ingest log %v bytes", walBytes, readIn, readings,
		metricValue(t, admin, `eddy_ingest_log_bytes{source="sensors"}`))

	// Longer than the 2 × 3 s the checkpoints would tolerate.
	await.Never(t, 8*time.Second, func() error {
		if r.p.logContains("checkpoints keep failing") {
			return errors.New("checkpoints failed during the outage instead of waiting for the uplink")
		}
		return nil
	})
	up.Restart() // the uplink returns
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	want := expectedWindows(readings, devices)
	if err := await.Within(3*time.Minute, func() error {
		if n := col.windowCount("budget"); n < len(want) {
			return fmt.Errorf("%d of %d results after the uplink returned", n, len(want))
		}
		return nil
	}); err != nil {
		got := col.windows("budget")
		var missing []string
		for k := range want {
			if _, ok := got[k]; !ok && len(missing) < 10 {
				missing = append(missing, k)
			}
		}
		t.Logf("missing (up to 10): %v", missing)
		for _, m := range []string{"eddy_wal_delivered_total", "eddy_wal_backlog_messages", "eddy_wal_inflight",
			"eddy_wal_write_blocked", "eddy_wal_connected"} {
			t.Logf("%s = %v", m, metricValue(t, admin, m+`{sink="cloud"}`))
		}
		t.Logf("eddy_readings_in_total = %v, eddy_results_out_total = %v", metricValue(t, admin, `eddy_readings_in_total{pipeline="sums"}`),
			metricValue(t, admin, `eddy_results_out_total{pipeline="sums"}`))
		// A goroutine dump in the log shows where the pipeline waits.
		r.p.signal(syscall.SIGQUIT)
		<-r.p.done
		t.Fatal(err)
	}
	r.stop()
	got := col.windows("budget")
	col.mu.Lock()
	dups := len(col.duplicates)
	col.mu.Unlock()
	if dups > 0 {
		t.Fatalf("%d duplicated results", dups)
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("%s: got %q, want %q", k, got[k], w)
		}
	}
}

// TestWALSink_DiskBudgetDropsOldest: with when_full = "drop_oldest" the
// pipeline never stops; past the budget the oldest undelivered results are
// dropped and counted, exactly: delivered + dropped = produced, and every
// delivered result is right and arrives once.
func TestWALSink_DiskBudgetDropsOldest(t *testing.T) {
	for _, u := range mosquittoUpstreams() {
		t.Run(u.name, func(t *testing.T) { testDiskBudgetDropsOldest(t, u) })
	}
}

func testDiskBudgetDropsOldest(t *testing.T, u upstreamBroker) {
	const readings, devices = 60000, 1000
	in := mosquitto.Start(t)
	up := mosquitto.Start(t, u.opts...)
	col := newCollector(t, up.URL(), "results/#")
	up.Stop()

	r := newCrashRun(t, strings.Replace(u.withWindow(walCrashConfig), `delivery = "exactly_once"`, `delivery = "exactly_once"
  buffer {
    max_disk  = "1MiB"
    when_full = "drop_oldest"
  }`, 1), "%DEVICE%", "drop", "%BROKER%", in.URL(), "%UPSTREAM%", up.URL())
	admin := r.admin
	r.start()
	publishReadings(t, in.URL(), "pub-drop", readings, devices, func(int) {})
	want := expectedWindows(readings, devices)
	// Everything is processed although the uplink is down.
	await.True(t, 60*time.Second, "metricValue(t, admin, `eddy_readings_in_total{pipeline=\"sums\"}`) >= readings+1", func() bool {
		return metricValue(t, admin, `eddy_readings_in_total{pipeline="sums"}`) >= readings+1
	})
	await.True(t, 30*time.Second, "metricValue(t, admin, `eddy_wal_dropped_total{sink=\"cloud\"}`) > 0", func() bool { return metricValue(t, admin, `eddy_wal_dropped_total{sink="cloud"}`) > 0 })
	up.Restart()
	var dropped float64
	await.True(t, 120*time.Second, `float64(col.windowCount("drop"))+dropped >= float64(len(want))`, func() bool {
		dropped = metricValue(t, admin, `eddy_wal_dropped_total{sink="cloud"}`)
		return float64(col.windowCount("drop"))+dropped >= float64(len(want))
	})
	// Nothing more may arrive: no repeat, and no result beyond those
	// counted as delivered or dropped.
	await.Never(t, time.Second, func() error {
		col.mu.Lock()
		dups := len(col.duplicates)
		col.mu.Unlock()
		n := float64(col.windowCount("drop")) + metricValue(t, admin, `eddy_wal_dropped_total{sink="cloud"}`)
		if dups > 0 || n > float64(len(want)) {
			return fmt.Errorf("after all %d results were delivered or dropped: %d duplicated, %v delivered + dropped", len(want), dups, n)
		}
		return nil
	})
	got := col.windows("drop")
	dropped = metricValue(t, admin, `eddy_wal_dropped_total{sink="cloud"}`)
	r.stop()
	col.mu.Lock()
	dups := len(col.duplicates)
	col.mu.Unlock()
	if dups > 0 {
		t.Fatalf("%d duplicated results", dups)
	}
	if float64(len(got))+dropped != float64(len(want)) {
		t.Fatalf("delivered %d + dropped %v != produced %d", len(got), dropped, len(want))
	}
	for k, g := range got {
		if want[k] != g {
			t.Fatalf("%s: got %q, want %q", k, g, want[k])
		}
	}
	t.Logf("%d results: %d delivered, %v dropped (counted exactly)", len(want), len(got), dropped)
}
