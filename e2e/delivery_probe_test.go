package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/agent/probe"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// probeConfig has an MQTT source with %CONNS% connections on %BROKER% and
// two MQTT sinks there: "up" with the defaults (qos 2, max_inflight 20)
// and "wide" with max_inflight 100.
const probeConfig = `
agent {
  device_id = "gw-probe"
  data_dir  = "%DATA%"
}
source "mqtt" "site" {
  broker      = "%BROKER%"
  topics      = ["sensors/+/telemetry"]
  connections = %CONNS%
}
sink "mqtt" "up" {
  broker = "%BROKER%"
  topic  = "results/${device_id}/${pipeline}/${key}"
}
sink "mqtt" "wide" {
  broker       = "%BROKER%"
  topic        = "results/${device_id}/${pipeline}/${key}"
  max_inflight = 100
}
pipeline "temps" {
  from = source.mqtt.site
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.mqtt.up, sink.mqtt.wide]
}
`

// runProbe runs `eddy probe ARGS` and returns its output and exit code.
func runProbe(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := runEddy(t, append([]string{"probe"}, args...)...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &ee):
		return out, ee.ExitCode()
	}
	t.Fatalf("eddy probe: %v", err)
	return "", 0
}

func probeReport(t *testing.T, out string) probe.Report {
	t.Helper()
	var r probe.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	return r
}

func TestProbe_UpstreamStockMosquitto(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	cfg := writeConfig(t, t.TempDir(), probeConfig, "%BROKER%", b.URL(), "%CONNS%", "1")
	// max_inflight = 100 against mosquitto's default of 20 would lose results.
	out, code := runProbe(t, "upstream", "-c", cfg, "--sink", "wide", "--json")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (unfit):\n%s", code, out)
	}
	r := probeReport(t, out)
	if len(r.Upstreams) != 1 || r.Fit {
		t.Fatalf("report: %s", out)
	}
	v := r.Upstreams[0].Verdict
	if v.MaxQoS != 2 || v.Window != (probe.Window{Max: 20, Limited: true}) || v.UseQoS != 2 || v.UseMaxInflight != 20 {
		t.Errorf("max QoS %d, window %+v, use qos %d max_inflight %d; want 2, 20 (limited), 2, 20", v.MaxQoS, v.Window, v.UseQoS, v.UseMaxInflight)
	}
	if !slices.ContainsFunc(v.Findings, func(f probe.Finding) bool {
		return f.Level == probe.Fail && strings.Contains(f.Text, "max_inflight = 100 would lose results: set max_inflight = 20")
	}) {
		t.Errorf("no fail finding for max_inflight: %+v", v.Findings)
	}
}

func TestProbe_UpstreamFits(t *testing.T) {
	b := mosquitto.Start(t) // max_inflight_messages 1000
	cfg := writeConfig(t, t.TempDir(), probeConfig, "%BROKER%", b.URL(), "%CONNS%", "1")
	out, code := runProbe(t, "upstream", "-c", cfg, "--sink", "up")
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{"QoS 2 bursts: 1 2 5 10 20 50 100 200 500 1000 whole", "ok    in-flight window: 1000 or more at QoS 2", "use:          qos = 2, max_inflight = 20", "result: the configuration fits"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestProbe_UpstreamRefusesQoS2(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.Conf("max_qos 1"))
	cfg := writeConfig(t, t.TempDir(), probeConfig, "%BROKER%", b.URL(), "%CONNS%", "1")
	out, code := runProbe(t, "upstream", "-c", cfg, "--sink", "up")
	if code != 3 {
		t.Fatalf("exit %d, want 3:\n%s", code, out)
	}
	for _, want := range []string{"fail  QoS 2: the broker closes the connection", "set qos = 1", "use:          qos = 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestProbe_UpstreamACLRefusesTopic(t *testing.T) {
	// Anonymous clients may use the probe's scratch topics and sensors,
	// not results/: mosquitto acknowledges a publish there and drops it.
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("topic readwrite eddy-probe/#\ntopic readwrite sensors/#\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := mosquitto.Start(t, mosquitto.Conf("acl_file "+acl))
	cfg := writeConfig(t, t.TempDir(), probeConfig, "%BROKER%", b.URL(), "%CONNS%", "1")
	out, code := runProbe(t, "upstream", "-c", cfg, "--sink", "up")
	if code != 3 {
		t.Fatalf("exit %d, want 3:\n%s", code, out)
	}
	if want := "fail  topic results/gw-probe/temps/eddy-probe: publish acknowledged but never delivered"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestProbe_SourceSharedMosquitto(t *testing.T) {
	b := mosquitto.Start(t)
	cfg := writeConfig(t, t.TempDir(), probeConfig, "%BROKER%", b.URL(), "%CONNS%", "2")
	out, code := runProbe(t, "source", "-c", cfg, "--json")
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	r := probeReport(t, out)
	if len(r.Sources) != 1 {
		t.Fatalf("report: %s", out)
	}
	s := r.Sources[0]
	if s.Verdict.Shared != "ok" || len(s.Observed.Conns) != 2 || s.Observed.Plain == nil {
		t.Fatalf("shared %q, %d shared connections: %s", s.Verdict.Shared, len(s.Observed.Conns), out)
	}
	got := 0
	for _, c := range s.Observed.Conns {
		got += c.Received
		if !strings.HasPrefix(c.ClientID, "eddy-gw-probe-site-probe-") || len(c.Granted) != 1 || c.Granted[0] != 1 {
			t.Errorf("connection %+v: want a probe client id and QoS 1 granted", c)
		}
	}
	if got != s.Observed.Published || s.Observed.Plain.Received != s.Observed.Published {
		t.Errorf("published %d, shared connections got %d, plain %d", s.Observed.Published, got, s.Observed.Plain.Received)
	}
}

func TestProbe_Usage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "Usage: eddy probe upstream"},
		{[]string{"sideways"}, 2, "Usage: eddy probe upstream"},
		{[]string{"upstream", "-h"}, 0, "-sink"},
		{[]string{"source", "--help"}, 0, "-source"},
		{[]string{"upstream", "-c", "/nonexistent.hcl"}, 1, "Cannot read configuration"},
	} {
		out, code := runProbe(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("eddy probe %v: exit %d, want %d; output lacks %q?\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
}

// probeSparkplugConfig has a Sparkplug sink on %BROKER% whose births wait
// for primary host scada-1.
const probeSparkplugConfig = `
agent {
  device_id = "gw-probe"
  data_dir  = "%DATA%"
}
source "file" "in" { path = "in.jsonl" }
sink "sparkplug" "scada" {
  broker          = "%BROKER%"
  group_id        = "plant1"
  primary_host_id = "scada-1"
}
pipeline "sums" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.sparkplug.scada]
}
`

// TestProbe_SparkplugSink: `eddy probe upstream` covers a Sparkplug sink:
// it connects as the node would, reads what mosquitto announces in MQTT 5,
// sees the subscriptions granted at QoS 1 and the primary host's retained
// STATE, first offline (a warning: the births would wait), then online.
func TestProbe_SparkplugSink(t *testing.T) {
	b := mosquitto.Start(t)
	host := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("scada-1"))
	if tok := host.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer host.Disconnect(100)
	cfg := writeConfig(t, t.TempDir(), probeSparkplugConfig, "%BROKER%", b.URL())
	for _, tc := range []struct {
		online bool
		state  string
		level  probe.Level
	}{{false, "offline", probe.Warn}, {true, "online", probe.OK}} {
		payload := fmt.Sprintf(`{"online":%v,"timestamp":%d}`, tc.online, time.Now().UnixMilli())
		if tok := host.Publish("spBv1.0/STATE/scada-1", 1, true, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		out, code := runProbe(t, "upstream", "-c", cfg, "--sink", "scada", "--json")
		if code != 0 {
			t.Fatalf("exit %d, want 0 (fit):\n%s", code, out)
		}
		r := probeReport(t, out)
		if len(r.Sparkplugs) != 1 || !r.Fit {
			t.Fatalf("report: %s", out)
		}
		o := r.Sparkplugs[0].Observed
		if o.Announced == nil || o.Announced.ReceiveMaximum == 0 || o.Announced.MaximumQoS != 2 {
			t.Errorf("announced %+v; want mosquitto's MQTT 5 receive maximum and maximum QoS 2", o.Announced)
		}
		if o.Granted["spBv1.0/plant1/NCMD/gw-probe"] != 1 || o.Granted["spBv1.0/STATE/scada-1"] != 1 || o.HostState != tc.state {
			t.Errorf("granted %v, host state %q; want QoS 1 on both, %q", o.Granted, o.HostState, tc.state)
		}
		if !slices.ContainsFunc(r.Sparkplugs[0].Findings, func(f probe.Finding) bool {
			return f.Level == tc.level && strings.Contains(f.Text, "primary host scada-1")
		}) {
			t.Errorf("no %s finding on the primary host: %+v", tc.level, r.Sparkplugs[0].Findings)
		}
	}
}
