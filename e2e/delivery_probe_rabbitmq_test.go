package e2e

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/scripts/rabbitmq"
)

// TestProbe_RabbitMQ: RabbitMQ 3.10's MQTT plugin answers QoS 2 with PUBACK
// (a downgrade the exactly-once sink's QoS 2 session stalls on) and binds
// $share/GROUP/FILTER as a literal filter (a source with connections = 2
// ingests nothing); the probe names both, with the settings to use.
func TestProbe_RabbitMQ(t *testing.T) {
	b := rabbitmq.Shared(t)
	cfg := writeConfig(t, t.TempDir(), probeConfig, "%BROKER%", b.MQTTURL(), "%CONNS%", "2")

	out, code := runProbe(t, "upstream", "-c", cfg, "--sink", "up")
	t.Logf("eddy probe upstream:\n%s", out)
	if code != 3 {
		t.Fatalf("probe upstream: exit %d, want 3:\n%s", code, out)
	}
	for _, want := range []string{"fail  QoS 2: the broker answers a QoS 2 PUBLISH with PUBACK", "set qos = 1", "use:          qos = 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe upstream: output lacks %q:\n%s", want, out)
		}
	}

	out, code = runProbe(t, "source", "-c", cfg)
	t.Logf("eddy probe source:\n%s", out)
	if code != 3 {
		t.Fatalf("probe source: exit %d, want 3:\n%s", code, out)
	}
	for _, want := range []string{"takes $share/GROUP/FILTER as a literal topic filter", "set connections = 1", "plain subscription  got 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe source: output lacks %q:\n%s", want, out)
		}
	}
}
