package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestWALSink_BrokerRefusesQoS2: an exactly-once MQTT sink publishing to a
// broker that refuses QoS 2 (mosquitto with max_qos 1, which closes the
// connection after a QoS 2 PUBLISH, as AWS IoT Core and Azure IoT Hub do)
// logs one error line that names it and says what to do, within seconds of
// its first results, and /readyz reports the sink failing while the WAL
// counts the backlog. Stopped with SIGTERM, the agent says how many results
// it leaves undelivered in the WAL. At MQTT 5 (the default) the CONNACK's
// Maximum QoS names it before any publish; at 3.1.1 the closes do.
func TestWALSink_BrokerRefusesQoS2(t *testing.T) {
	for _, tt := range []struct {
		name, sink, line string
	}{
		{"mqtt5", "", "the broker announces Maximum QoS 1 in its MQTT 5 CONNACK"},
		{"mqtt311", "\n  protocol_version = 4", "the broker does not accept QoS 2"},
	} {
		t.Run(tt.name, func(t *testing.T) { testWALSinkBrokerRefusesQoS2(t, tt.name, tt.sink, tt.line) })
	}
}

func testWALSinkBrokerRefusesQoS2(t *testing.T, name, sink, line string) {
	in := mosquitto.Start(t)
	up := mosquitto.Start(t, mosquitto.Conf("max_qos 1"))
	const topic = `topic    = "results/${device_id}/${pipeline}/${key}"`
	r := newCrashRun(t, strings.Replace(walCrashConfig, topic, topic+sink, 1), "%DEVICE%", "refused-"+name, "%BROKER%", in.URL(), "%UPSTREAM%", up.URL())
	r.start()
	publishReadings(t, in.URL(), "pub-refused-"+name, 5000, 100, func(int) {})
	await.True(t, 60*time.Second, "metricValue(t, r.admin, `eddy_wal_backlog_messages{sink=\"cloud\"}`) > 0", func() bool { return metricValue(t, r.admin, `eddy_wal_backlog_messages{sink="cloud"}`) > 0 })
	start := time.Now()
	if !r.p.waitLog(line, 15*time.Second) {
		t.Fatalf("no %q line 15 s after results were committed", line)
	}
	t.Logf("named %v after the first committed results", time.Since(start).Round(time.Millisecond))
	var errLines []string
	for _, l := range strings.Split(r.p.output(), "\n") {
		if strings.Contains(l, line) {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "level=ERROR") || !strings.Contains(errLines[0], "qos = 1") ||
		!strings.Contains(errLines[0], "cloud") {
		t.Errorf("want one error line naming the sink and what to do, got %q", errLines)
	}
	code, ok, detail := readyzCheck(r.admin, "wal/cloud")
	if code != http.StatusServiceUnavailable || ok || !strings.Contains(detail, line) {
		t.Errorf("/readyz %d, wal/cloud ok=%v %q; want 503 naming the refusal", code, ok, detail)
	}
	if n := metricValue(t, r.admin, `eddy_wal_delivered_total{sink="cloud"}`); n != 0 {
		t.Errorf("%v delivered to a broker that refuses QoS 2", n)
	}
	t.Logf("/readyz wal/cloud: %s", detail)
	r.p.stop(syscall.SIGTERM, 60*time.Second)
	if !regexp.MustCompile(`results not delivered upstream yet.* sink=cloud undelivered=[1-9]`).MatchString(r.p.output()) {
		t.Errorf("no count of undelivered results at SIGTERM in the output")
	}
}

// TestWALSink_MQTT5ACLRefusal: an upstream broker whose access rules refuse
// the results' topic (mosquitto's acl_file) answers each PUBREC with 0x87
// "not authorized" at MQTT 5 (at 3.1.1 it acknowledges and drops the
// result): the agent names the reason in one error line and /readyz, counts
// it in eddy_wal_mqtt_reasons_total, and delivers nothing, keeping the
// results in the WAL.
func TestWALSink_MQTT5ACLRefusal(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("topic read results/#\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := mosquitto.Start(t)
	up := mosquitto.Start(t, mosquitto.Conf("acl_file "+acl))
	r := newCrashRun(t, walCrashConfig, "%DEVICE%", "acl", "%BROKER%", in.URL(), "%UPSTREAM%", up.URL())
	r.start()
	publishReadings(t, in.URL(), "pub-acl", 5000, 100, func(int) {})
	const metric = `eddy_wal_mqtt_reasons_total{sink="cloud",packet="pubrec",reason="not_authorized"}`
	await.True(t, 60*time.Second, `metricValue(t, r.admin, metric) > 0`, func() bool { return metricValue(t, r.admin, metric) > 0 })
	const line = "the broker refuses this sink's publishes: pubrec reason not_authorized (0x87)"
	if !r.p.waitLog(line, 10*time.Second) {
		t.Fatalf("no %q line", line)
	}
	if n := strings.Count(r.p.output(), line); n != 1 {
		t.Errorf("%d refusal lines, want one", n)
	}
	code, ok, detail := readyzCheck(r.admin, "wal/cloud")
	if code != http.StatusServiceUnavailable || ok || !strings.Contains(detail, "not_authorized") {
		t.Errorf("/readyz %d, wal/cloud ok=%v %q; want 503 naming the reason", code, ok, detail)
	}
	if n := metricValue(t, r.admin, `eddy_wal_delivered_total{sink="cloud"}`); n != 0 {
		t.Errorf("%v delivered through an ACL that refuses the topic", n)
	}
	t.Logf("%s %v; /readyz: %s", metric, metricValue(t, r.admin, metric), detail)
}
