package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/rabbitmq"
)

// rabbitConfig is drainConfig on device %DEVICE% with an admin endpoint.
var rabbitConfig = replaceAll(drainConfig,
	`device_id   = "drain"`, `device_id   = "%DEVICE%"`,
	`admin       = ""`, `admin       = "%ADMIN%"`)

// TestWALSink_RabbitMQDowngradesQoS2: RabbitMQ's MQTT plugin answers QoS 2
// PUBLISHes with PUBACK (it takes them at QoS 1). An exactly-once sink at
// QoS 2 counts the first window's results delivered (the broker has them,
// once), publishes nothing more (no result twice, no loop), names the
// downgrade in one error line within seconds and fails /readyz; SIGTERM
// stops it within its bound. The same at delivery = "at_least_once", which
// publishes from the same WAL.
func TestWALSink_RabbitMQDowngradesQoS2(t *testing.T) {
	for _, delivery := range []string{"exactly_once", "at_least_once"} {
		t.Run(delivery, func(t *testing.T) { testRabbitMQDowngrade(t, delivery) })
	}
}

func testRabbitMQDowngrade(t *testing.T, delivery string) {
	device := "rabbit-q2-" + strings.ReplaceAll(delivery, "_", "-")
	rb := rabbitmq.Shared(t)
	col := newCollector(t, rb.MQTTURL(), "results/"+device+"/#")
	dir := t.TempDir()
	writeWindowReadings(t, filepath.Join(dir, "in.jsonl"), 200, 10)
	p := startAgent(t, dir, rabbitConfig, "%DEVICE%", device, "%UPSTREAM%", rb.MQTTURL(),
		`delivery = "exactly_once"`, `delivery = "`+delivery+`"`, "%SINK%", "\n  drain_timeout = \"120s\"")
	const line = "the broker downgrades QoS 2 to 1: set qos = 1"
	start := time.Now()
	if !p.waitLog(line, 30*time.Second) {
		t.Fatalf("no %q line", line)
	}
	t.Logf("downgrade named %v after the start", time.Since(start).Round(time.Millisecond))
	delivered := func() float64 { return metricValue(t, p.admin, `eddy_wal_delivered_total{sink="cloud"}`) }
	await.True(t, 10*time.Second, `n > 0 && len(col.byID) >= int(n)`, func() bool {
		n := delivered()
		col.mu.Lock()
		defer col.mu.Unlock()
		return n > 0 && len(col.byID) >= int(n)
	})
	n := delivered()
	// A loop would publish again within this observation.
	if await.Holds(2*time.Second, func() bool {
		col.mu.Lock()
		defer col.mu.Unlock()
		return len(col.byID) > int(n) || len(col.duplicates) > 0 || delivered() > n
	}) {
		t.Error("results published again after the downgrade")
	}
	col.mu.Lock()
	got, dups := len(col.byID), len(col.duplicates)
	col.mu.Unlock()
	if got != int(n) || n > 20 || dups != 0 {
		t.Errorf("%d results at the subscriber, %v counted delivered, %d twice; want one window (≤ 20), each once", got, n, dups)
	}
	var errLines []string
	for _, l := range strings.Split(p.output(), "\n") {
		if strings.Contains(l, line) {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "level=ERROR") {
		t.Errorf("want one error line, got %q", errLines)
	}
	code, ok, detail := readyzCheck(p.admin, "wal/cloud")
	if code != http.StatusServiceUnavailable || ok || !strings.Contains(detail, line) {
		t.Errorf("/readyz %d, wal/cloud ok=%v %q; want 503 naming the downgrade", code, ok, detail)
	}
	stopped := time.Now()
	p.stop(syscall.SIGTERM, 30*time.Second)
	if took := time.Since(stopped); took > 6*time.Second {
		t.Errorf("SIGTERM took %v; the bound is 2 s for delivery", took)
	}
}

// TestWALSink_RabbitMQQoS1UnderKills: the same sink at qos = 1 against
// RabbitMQ, SIGKILLed twice while it publishes: every window arrives, right
// and in order per key; repeats are byte-identical (same id) and at most the
// in-flight window (20) per kill.
func TestWALSink_RabbitMQQoS1UnderKills(t *testing.T) {
	rb := rabbitmq.Shared(t)
	col := newCollector(t, rb.MQTTURL(), "results/rabbit-q1/#")
	dir := t.TempDir()
	want := writeWindowReadings(t, filepath.Join(dir, "in.jsonl"), 1000, 10)
	cfg := writeConfig(t, dir, drainConfig, `device_id   = "drain"`, `device_id   = "rabbit-q1"`,
		"%UPSTREAM%", rb.MQTTURL(), "%SINK%", "\n  qos = 1")
	received := func() int {
		col.mu.Lock()
		defer col.mu.Unlock()
		return len(col.byID)
	}
	const kills = 2
	for k := 1; k <= kills; k++ {
		p := startEddy(t, "run", "-c", cfg)
		at := k * len(want) / (kills + 2)
		await.True(t, 120*time.Second, `received() >= at || p.exited()`, func() bool { return received() >= at || p.exited() })
		p.kill()
		t.Logf("kill %d at %d results received", k, received())
	}
	p := startEddy(t, "run", "-c", cfg)
	if !p.wait(180 * time.Second) {
		t.Fatal("the last run did not exit")
	}
	if p.err != nil {
		t.Fatalf("the last run: %v", p.err)
	}
	await.True(t, 60*time.Second, `col.windowCount("rabbit-q1") >= len(want)`, func() bool { return col.windowCount("rabbit-q1") >= len(want) })
	if diff := differingWindows(t, want, col.windows("rabbit-q1")); diff > 0 {
		t.Errorf("%d of %d windows differ", diff, len(want))
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.duplicates) > 20*kills || len(col.changed) > 0 || len(col.outOfOrder) > 0 {
		t.Errorf("%d repeats (at most %d), %d with another payload, %d out of order",
			len(col.duplicates), 20*kills, len(col.changed), len(col.outOfOrder))
	}
	t.Logf("%d windows, %d kills: %d repeats by id", len(want), kills, len(col.duplicates))
}
