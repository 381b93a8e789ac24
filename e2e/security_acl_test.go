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

// aclBrokerConfig: an embedded broker whose acls keep every sensor to its
// own subtree for publishing and subscribing, and let "ops" read every
// sensor's topics; %TLS% is a tls block or nothing (identities are then MQTT
// usernames).
const aclBrokerConfig = `
agent {
  device_id = "acldev"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
}
broker {
  listen = "%BROKER%"
  %TLS%
  acl {
    user      = "*"
    publish   = ["sensors/${username}/#"]
    subscribe = ["sensors/${username}/#"]
  }
  acl {
    user      = "ops"
    subscribe = ["sensors/#"]
  }
}
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["sensors/+/telemetry"]
  qos    = 1
}
sink "file" "out" { path = "%DIR%/out.jsonl" }
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "1s"
  }
  aggregate { n = count() }
  to = [sink.file.out]
}
`

// topics collects the topics a paho client receives.
type topics struct {
	mu  sync.Mutex
	got []string
}

func (tp *topics) handle(_ paho.Client, m paho.Message) {
	tp.mu.Lock()
	tp.got = append(tp.got, m.Topic())
	tp.mu.Unlock()
}

func (tp *topics) list() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.got...)
}

// TestEmbeddedBroker_SubscribeOutsideACL runs the real binary with an
// embedded broker requiring client certificates and acls: a sensor whose
// certificate allows sensors/dev2/# subscribes to "#", "$SYS/#" and
// sensors/dev1/#: each is refused in the SUBACK and counted, and it gets
// none of dev1's readings nor $SYS, while its own subtree reaches it and
// "ops", allowed sensors/#, gets both sensors' readings. A client with a
// certificate of another CA is refused at the handshake, counted as tls.
func TestEmbeddedBroker_SubscribeOutsideACL(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "device")
	other := testpki.NewCA(t, dir, "other")
	cert, key := ca.Issue(t, "broker")
	addr := loopback.Addr(t)
	tlsBlock := `tls {
    ca   = "` + ca.CAFile + `"
    cert = "` + cert + `"
    key  = "` + key + `"
  }`
	ag := startAgent(t, dir, aclBrokerConfig, "%BROKER%", addr, "%TLS%", tlsBlock)

	connect := func(cn string, ca *testpki.CA) (paho.Client, error) {
		cert, key := ca.Issue(t, cn)
		c := paho.NewClient(paho.NewClientOptions().AddBroker("ssl://" + addr).SetClientID(cn + "-client").
			SetProtocolVersion(4).SetTLSConfig(ca.ClientTLS(t, cert, key)).SetAutoReconnect(false).
			SetConnectTimeout(5 * time.Second))
		tok := c.Connect()
		if !tok.WaitTimeout(15 * time.Second) {
			t.Fatalf("connect %s: timed out", cn)
		}
		if tok.Error() == nil {
			t.Cleanup(func() { c.Disconnect(100) })
		}
		return c, tok.Error()
	}
	mustConnect := func(cn string) paho.Client {
		c, err := connect(cn, ca)
		if err != nil {
			t.Fatalf("connect %s: %v", cn, err)
		}
		return c
	}
	subscribe := func(c paho.Client, filter string, tp *topics) byte {
		tok := c.Subscribe(filter, 1, tp.handle)
		if !tok.WaitTimeout(10 * time.Second) {
			t.Fatalf("subscribe %s: timed out", filter)
		}
		return tok.(*paho.SubscribeToken).Result()[filter]
	}
	publish := func(c paho.Client, topic string) {
		if tok := c.Publish(topic, 1, false, `{"device":"x"}`); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}

	dev1, dev2, ops := mustConnect("dev1"), mustConnect("dev2"), mustConnect("ops")
	var refused, own, all topics
	for _, f := range []string{"#", "$SYS/#", "sensors/dev1/#"} {
		if code := subscribe(dev2, f, &refused); code != 0x80 {
			t.Errorf("dev2 subscribing to %s: SUBACK %#x, want 0x80 (refused)", f, code)
		}
	}
	if code := subscribe(dev2, "sensors/dev2/#", &own); code != 1 {
		t.Fatalf("dev2 subscribing to its own subtree: SUBACK %#x", code)
	}
	if code := subscribe(ops, "sensors/#", &all); code != 1 {
		t.Fatalf("ops subscribing to sensors/#: SUBACK %#x", code)
	}
	publish(dev1, "sensors/dev1/telemetry")
	await.True(t, 10*time.Second, `len(all.list()) == 1`, func() bool { return len(all.list()) == 1 })
	// The broker's queue to dev2 is in order: its own message arrives after
	// dev1's would have.
	publish(dev2, "sensors/dev2/telemetry")
	await.True(t, 10*time.Second, `len(own.list()) == 1 && len(all.list()) == 2`, func() bool { return len(own.list()) == 1 && len(all.list()) == 2 })
	// paho hands dev2's own message to every handler whose filter matches
	// it, refused or not: only another topic tells a leak.
	for _, topic := range refused.list() {
		if !strings.HasPrefix(topic, "sensors/dev2/") {
			t.Errorf("dev2 received %s through a refused subscription", topic)
		}
	}
	if n := metricValue(t, ag.admin, `eddy_broker_refused_total{reason="acl_subscribe"}`); n != 3 {
		t.Errorf(`eddy_broker_refused_total{reason="acl_subscribe"} = %v, want 3`, n)
	}
	if !ag.logContains("subscription refused") || !ag.logContains("dev2-client") {
		t.Error("the refused subscriptions are not logged with the client")
	}

	if _, err := connect("dev3", other); err == nil {
		t.Fatal("a certificate of another CA got in")
	}
	await.True(t, 10*time.Second, "metricValue(t, ag.admin, `eddy_broker_refused_total{reason=\"tls\"}`) >= 1", func() bool {
		return metricValue(t, ag.admin, `eddy_broker_refused_total{reason="tls"}`) >= 1
	})
}

// TestEmbeddedBroker_RefusedPublishFloodLogBounded runs the real binary
// with publish acls: a sensor sends QoS 1 publishes of 200 KB to another
// sensor's topic over MQTT 3.1.1, reconnecting after each refusal
// (disconnected). Five of them grow the log by one short line each, naming
// the client, topic, reason and size, and holding no payload byte; thirty
// more are counted but held to the log's rate limit.
func TestEmbeddedBroker_RefusedPublishFloodLogBounded(t *testing.T) {
	dir := t.TempDir()
	addr := loopback.Addr(t)
	ag := startAgent(t, dir, aclBrokerConfig, "%BROKER%", addr, "%TLS%", "")
	// A readable marker, unlike anything the agent logs otherwise.
	payload := strings.Repeat("Q", 200_000)
	refusals := func() float64 {
		return metricValue(t, ag.admin, `eddy_broker_refused_total{reason="acl_publish"}`)
	}
	flood := func(n int) {
		for range n {
			before := refusals()
			c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("intruder").
				SetUsername("dev2").SetProtocolVersion(4).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
			if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("connect: %v", tok.Error())
			}
			c.Publish("sensors/dev1/telemetry", 1, false, payload) // refused: no PUBACK, disconnected
			await.True(t, 10*time.Second, `refusals() == before+1 && !c.IsConnectionOpen()`, func() bool { return refusals() == before+1 && !c.IsConnectionOpen() })
			c.Disconnect(0)
		}
	}
	start := len(ag.output())
	flood(5)
	grown := ag.output()[start:]
	if len(grown) > 3<<10 {
		t.Errorf("5 refused publishes of 200 KB grew the log by %d bytes:\n%.3000s", len(grown), grown)
	}
	if n := strings.Count(grown, "publish refused:"); n != 5 {
		t.Errorf("%d refusal lines for 5 refusals:\n%s", n, grown)
	}
	for _, want := range []string{"intruder", "sensors/dev1/telemetry", "acl_publish", "200000"} {
		if !strings.Contains(grown, want) {
			t.Errorf("the refusal lines lack %q:\n%s", want, grown)
		}
	}

	flood(30)
	all := ag.output()[start:]
	if len(all) > 6<<10 {
		t.Errorf("35 refused publishes grew the log by %d bytes, want it held by the rate limit:\n%.6000s", len(all), all)
	}
	if strings.Contains(all, "QQQQQQQQ") || strings.Contains(all, "81 81 81") {
		t.Errorf("the payload is in the log:\n%.3000s", all)
	}
	if n := refusals(); n != 35 {
		t.Errorf(`eddy_broker_refused_total{reason="acl_publish"} = %v, want 35`, n)
	}
}

// TestEmbeddedBroker_PacketOverLimitCounted runs the real binary with its
// embedded broker at the default max_message_size: a 5 MiB publish, over
// the packet limit and so cut off by the broker library from its header,
// is counted in eddy_broker_too_large_total and logged with the client id
// (and without its payload).
func TestEmbeddedBroker_PacketOverLimitCounted(t *testing.T) {
	dir := t.TempDir()
	addr := loopback.Addr(t)
	ag := startAgent(t, dir, aclBrokerConfig, "%BROKER%", addr, "%TLS%", "")
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("big-sender").
		SetUsername("dev1").SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	start := len(ag.output())
	c.Publish("sensors/dev1/telemetry", 1, false, strings.Repeat("Q", 5<<20))
	await.True(t, 30*time.Second, `metricValue(t, ag.admin, "eddy_broker_too_large_total") == 1 && ag.logContains("big-sender")`, func() bool {
		return metricValue(t, ag.admin, "eddy_broker_too_large_total") == 1 && ag.logContains("big-sender")
	})
	grown := ag.output()[start:]
	if !strings.Contains(grown, "packet limit") {
		t.Errorf("the log does not say the packet was over the limit:\n%s", grown)
	}
	if len(grown) > 2<<10 || strings.Contains(grown, "QQQQQQQQ") {
		t.Errorf("the log grew by %d bytes:\n%.2000s", len(grown), grown)
	}
}
