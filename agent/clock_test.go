package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
)

// fakeClockStatus is a clock-status source the test switches.
type fakeClockStatus struct{ synced atomic.Bool }

func (f *fakeClockStatus) Synchronized() (bool, error) { return f.synced.Load(), nil }

// TestAgent_FutureSkewWaitsForClockSync: a device whose clock is not
// synchronised (a Raspberry Pi booted without network) accepts readings
// stamped far ahead of its clock instead of dead-lettering them, says so
// once in its log and in eddy_clock_synchronized; from the moment the clock
// is synchronised, max_future_skew dead-letters them again.
func TestAgent_FutureSkewWaitsForClockSync(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent")
	}
	dir := t.TempDir()
	brokerAddr := loopback.Addr(t)
	status := &fakeClockStatus{}
	a := startAgentWith(t, dir, `
agent {
  device_id = "clk"
  data_dir  = "%DATA%"
  admin     = "127.0.0.1:0"
}
broker { listen = "`+brokerAddr+`" }
source "mqtt" "s" {
  broker = "embedded"
  topics = ["sensors/+"]
  qos    = 1
  timestamp {
    field = "ts"
    unit  = "ms"
  }
  watermark { max_future_skew = "1m" }
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.mqtt.s
  to   = [sink.file.out]
}
ingest { linger = "0s" }
`, Options{ClockStatus: status})
	c := connectSensor(t, brokerAddr)
	send := func(n int, ts int64) {
		t.Helper()
		tok := c.Publish("sensors/a", 1, false, fmt.Sprintf(`{"n":%d,"ts":%d}`, n, ts))
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	out := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
		return strings.Count(string(b), "\n")
	}
	const future = `eddy_readings_dead_lettered_total{pipeline="p",reason="future_timestamp"}`
	wait := func(what string, cond func() bool) {
		t.Helper()
		await.Until(t, 30*time.Second, func() error {
			if cond() {
				return nil
			}
			return fmt.Errorf("%s: metrics %v", what, scrapeMetrics(t, a))
		})
	}
	logText := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
		return string(b)
	}

	hourAhead := time.Now().Add(time.Hour).UnixMilli()
	if m := scrapeMetrics(t, a); m["eddy_clock_synchronized"] != 0 {
		t.Fatalf("eddy_clock_synchronized = %v with the clock not synchronised", m["eddy_clock_synchronized"])
	}
	for i := range 3 {
		send(i, hourAhead)
		wait("a reading an hour ahead accepted", func() bool { return out() == i+1 })
	}
	if m := scrapeMetrics(t, a); m[future] != 0 {
		t.Fatalf("%v readings dead-lettered as future while the clock is not synchronised", m[future])
	}
	if n := strings.Count(logText(), "device clock not synchronised"); n != 1 {
		t.Fatalf("the unsynchronised clock logged %d times, want once", n)
	}

	status.synced.Store(true)
	wait("eddy_clock_synchronized 1", func() bool { return scrapeMetrics(t, a)["eddy_clock_synchronized"] == 1 })
	send(10, hourAhead)
	wait("a reading an hour ahead dead-lettered", func() bool { return scrapeMetrics(t, a)[future] == 1 })
	send(11, time.Now().UnixMilli())
	wait("a reading on time accepted", func() bool { return out() == 4 })
	if n := strings.Count(logText(), "device clock synchronised"); n != 1 {
		t.Fatalf("the synchronisation logged %d times, want once", n)
	}
}
