package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestWALSink_AtLeastOnceBuffersOutage: an at_least_once MQTT sink goes
// through its WAL as a disk buffer, published as soon as written: with the
// upstream broker down for longer than 3 × the paho sink's publish timeout
// (30 s each, after which its writes failed and the pipeline restarted
// from its checkpoint, again and again), the agent neither restarts nor
// stops taking readings; the results wait on disk (eddy_wal_backlog_*) and
// all arrive, right, once the broker returns.
func TestWALSink_AtLeastOnceBuffersOutage(t *testing.T) {
	t.Parallel()
	const readings, devices = 20000, 1000
	const outage = 3*30*time.Second + 5*time.Second
	in := mosquitto.Start(t)
	up := mosquitto.Start(t, mosquitto.DefaultInflight())
	col := newCollector(t, up.URL(), "results/#")
	up.Stop()
	down := time.Now()
	tmpl := strings.Replace(walCrashConfig, `delivery = "exactly_once"`, `delivery = "at_least_once"`, 1)
	r := newCrashRun(t, tmpl, "%DEVICE%", "alo", "%BROKER%", in.URL(), "%UPSTREAM%", up.URL())
	r.start()
	publishReadings(t, in.URL(), "pub-alo", readings, devices, func(int) {})
	want := expectedWindows(readings, devices)
	await.True(t, 60*time.Second, "metricValue(t, r.admin, `eddy_readings_in_total{pipeline=\"sums\"}`) >= readings+1", func() bool {
		return metricValue(t, r.admin, `eddy_readings_in_total{pipeline="sums"}`) >= readings+1
	})
	await.True(t, 30*time.Second, "metricValue(t, r.admin, `eddy_wal_backlog_messages{sink=\"cloud\"}`) >= float64(len(want))", func() bool {
		return metricValue(t, r.admin, `eddy_wal_backlog_messages{sink="cloud"}`) >= float64(len(want))
	})
	// Hold the outage; the agent stays up and nothing restarts.
	await.Never(t, time.Until(down.Add(outage)), func() error {
		if r.p.exited() {
			return errors.New("the agent exited during the outage")
		}
		return nil
	})
	for _, bad := range []string{"pipelines failed", "stopping after a failure", "sink write failed"} {
		if r.p.logContains(bad) {
			t.Errorf("%q in the log during a %v outage", bad, outage)
		}
	}
	t.Logf("after %v down: %v results in the WAL (%v bytes)", outage,
		metricValue(t, r.admin, `eddy_wal_backlog_messages{sink="cloud"}`), metricValue(t, r.admin, `eddy_wal_disk_bytes{sink="cloud"}`))
	up.Restart()
	await.True(t, 120*time.Second, `col.windowCount("alo") >= len(want)`, func() bool { return col.windowCount("alo") >= len(want) })
	r.stop()
	if diff := differingWindows(t, want, col.windows("alo")); diff > 0 {
		t.Errorf("%d of %d windows differ", diff, len(want))
	}
}
