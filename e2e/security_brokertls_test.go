package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/testpki"
)

// tlsBrokerConfig: an embedded broker that lets in only clients holding a
// certificate of the CA, a simulator publishing to it, and an exactly-once
// and an at-most-once MQTT sink publishing the results back to it.
const tlsBrokerConfig = `
agent {
  device_id = "tlsdev"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker {
  listen = "%BROKER%"
  tls {
    ca   = "%CA%"
    cert = "%CERT%"
    key  = "%KEY%"
  }
}
source "simulator" "sim" {
  devices = 2
  rate    = 50
}
sink "mqtt" "once" {
  broker = "embedded"
  topic  = "results/once/${key}"
}
sink "mqtt" "fast" {
  broker   = "embedded"
  topic    = "results/fast/${key}"
  delivery = "at_most_once"
}
pipeline "p" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" { size = "1s" }
  aggregate { n = count() }
  to = [sink.mqtt.once, sink.mqtt.fast]
}
checkpoint { interval = "1s" }
`

// TestEmbeddedTLS_InternalClients runs the real binary with an embedded
// broker requiring client certificates (broker { tls { ca } }): the
// simulator's readings reach the pipeline and both MQTT sinks pointed at
// the embedded broker publish their results there, which a client holding
// a certificate of the CA receives on the TLS listener. The agent's own
// clients hold no such certificate; they use the broker's internal
// listener.
func TestEmbeddedTLS_InternalClients(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "device")
	cert, key := ca.Issue(t, "broker")
	addr := loopback.Addr(t)
	p := startAgent(t, dir, tlsBrokerConfig, "%BROKER%", addr, "%CA%", ca.CAFile, "%CERT%", cert, "%KEY%", key)

	clientCert, clientKey := ca.Issue(t, "consumer")
	var mu sync.Mutex
	got := map[string]int{}
	c := paho.NewClient(paho.NewClientOptions().AddBroker("ssl://" + addr).SetClientID("consumer").
		SetTLSConfig(ca.ClientTLS(t, clientCert, clientKey)).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			parts := strings.Split(m.Topic(), "/") // results/SINK/KEY
			mu.Lock()
			got[parts[1]]++
			mu.Unlock()
		}))
	if tok := c.Connect(); !tok.WaitTimeout(15*time.Second) || tok.Error() != nil {
		t.Fatalf("consumer connect over TLS: %v", tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Subscribe("results/#", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	if !await.Holds(60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["once"] >= 2 && got["fast"] >= 2
	}) {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("results received over TLS: %v, want both sinks' (exactly-once %q, at-most-once %q)", got, "once", "fast")
	}
	if p.logContains("connection refused") || p.logContains("tls: ") {
		t.Errorf("the agent logged a connection failure:\n%s", p.output())
	}
}
