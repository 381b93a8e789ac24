package agent

import (
	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/testpki"

	"crypto/tls"
	"log/slog"
	"net"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
)

// TestBrokerTLS_ClientCertificates starts the embedded broker with the TLS
// config a broker { tls { ca, cert, key } } block gives, on every interface
// with no username: real paho clients without a certificate, or with one
// from another CA, are refused; one with a certificate from the CA connects
// and publishes.
func TestBrokerTLS_ClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "device")
	other := testpki.NewCA(t, dir, "other")
	serverCert, serverKey := ca.Issue(t, "broker")
	tc, err := brokerTLSConfig(&config.TLS{CA: ca.CAFile, Cert: serverCert, Key: serverKey})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Options{Listen: "0.0.0.0:0", TLS: tc}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Start beyond loopback with client certificates: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	got := make(chan string, 1)
	b.Subscribe([]string{"sensors/#"}, func(topic string, _ []byte) error {
		select {
		case got <- topic:
		default:
		}
		return nil
	})
	_, port, err := net.SplitHostPort(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	url := "ssl://127.0.0.1:" + port

	goodCert, goodKey := ca.Issue(t, "sensor")
	otherCert, otherKey := other.Issue(t, "sensor")
	tests := []struct {
		name   string
		tls    *tls.Config
		wantOK bool
	}{
		{"no certificate", ca.ClientTLS(t, "", ""), false},
		{"certificate from another CA", ca.ClientTLS(t, otherCert, otherKey), false},
		{"certificate from the CA", ca.ClientTLS(t, goodCert, goodKey), true},
	}
	var refusals uint64
	for _, tt := range tests {
		if !tt.wantOK {
			refusals++
		}
		t.Run(tt.name, func(t *testing.T) {
			c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("s-" + tt.name).
				SetTLSConfig(tt.tls).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
			tok := c.Connect()
			if !tok.WaitTimeout(10 * time.Second) {
				t.Fatal("connect timed out")
			}
			if !tt.wantOK {
				if tok.Error() == nil {
					c.Disconnect(100)
					t.Fatal("connected, want the handshake refused")
				}
				return
			}
			if tok.Error() != nil {
				t.Fatalf("connect: %v", tok.Error())
			}
			defer c.Disconnect(100)
			if p := c.Publish("sensors/a", 1, false, "{}"); !p.WaitTimeout(10*time.Second) || p.Error() != nil {
				t.Fatalf("publish: %v", p.Error())
			}
			if topic := <-got; topic != "sensors/a" {
				t.Fatalf("broker got %q", topic)
			}
		})
	}
	// paho tries MQTT 3.1.1, then 3.1: a refused client shakes hands twice.
	// The broker counts after its side of the handshake has failed.
	await.True(t, 10*time.Second, `b.Refused(broker.RefusedTLS) >= refusals`, func() bool { return b.Refused(broker.RefusedTLS) >= refusals })
	if n := b.Refused(broker.RefusedTLS); n > 2*refusals {
		t.Errorf("Refused(tls) = %d, want a refusal per failed handshake (%d clients refused)", n, refusals)
	}
}

// TestBrokerACLs_SubscribeExpanded: the acl blocks reach the broker with
// ${device_id} filled in, in publish and subscribe filters alike, and
// ${username} left for the broker.
func TestBrokerACLs_SubscribeExpanded(t *testing.T) {
	bc := &config.Broker{ACLs: []config.BrokerACL{{User: "*", Publish: []string{"sites/${device_id}/${username}"},
		Subscribe: []string{"cmd/${device_id}/${username}/#"}}}}
	got := brokerACLs(bc, map[string]string{"device_id": "gw1"})
	if len(got) != 1 || got[0].Publish[0] != "sites/gw1/${username}" || got[0].Subscribe[0] != "cmd/gw1/${username}/#" {
		t.Errorf("acls = %+v", got)
	}
}

// TestBrokerTLS_WithoutCA: without a CA the listener asks for no client
// certificate, so beyond loopback it still needs a username and password.
func TestBrokerTLS_WithoutCA(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "device")
	cert, key := ca.Issue(t, "broker")
	tc, err := brokerTLSConfig(&config.TLS{Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if tc.ClientAuth != tls.NoClientCert {
		t.Fatalf("ClientAuth = %v without a CA", tc.ClientAuth)
	}
	if b, err := broker.Start(broker.Options{Listen: "0.0.0.0:0", TLS: tc}, nil); err == nil {
		_ = b.Close()
		t.Fatal("Start beyond loopback with TLS alone succeeded")
	}
}

// TestBrokerACL_ClientCertificates: with client certificates and an acl
// keeping every sensor to sensors/${username}/#, a real paho client may
// publish under its own certificate's name; one publishing as another
// sensor is refused (its message reaches nothing) while the other sensor
// keeps publishing.
func TestBrokerACL_ClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "device")
	serverCert, serverKey := ca.Issue(t, "broker")
	tc, err := brokerTLSConfig(&config.TLS{CA: ca.CAFile, Cert: serverCert, Key: serverKey})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", TLS: tc,
		ACLs: []broker.ACL{{User: "*", Publish: []string{"sensors/${username}/#"}}}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	got := make(chan string, 100)
	b.Subscribe([]string{"sensors/#"}, func(topic string, _ []byte) error { got <- topic; return nil })
	_, port, _ := net.SplitHostPort(b.Addr())
	connect := func(cn string) paho.Client {
		cert, key := ca.Issue(t, cn)
		c := paho.NewClient(paho.NewClientOptions().AddBroker("ssl://127.0.0.1:" + port).SetClientID(cn).
			SetTLSConfig(ca.ClientTLS(t, cert, key)).SetAutoReconnect(false))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", cn, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}
	publish := func(c paho.Client, topic string) {
		if tok := c.Publish(topic, 1, false, "{}"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}
	s1, s2 := connect("s1"), connect("s2")
	publish(s1, "sensors/s1/telemetry")
	if topic := <-got; topic != "sensors/s1/telemetry" {
		t.Fatalf("got %s", topic)
	}
	s1.Publish("sensors/s2/telemetry", 1, false, "{}") // as another sensor: refused, unacknowledged
	publish(s2, "sensors/s2/telemetry")
	if topic := <-got; topic != "sensors/s2/telemetry" {
		t.Fatalf("got %s, want only s2's own publish", topic)
	}
	await.True(t, 10*time.Second, `!s1.IsConnectionOpen()`, func() bool { return !s1.IsConnectionOpen() })
	publish(s2, "sensors/s2/more")
	if topic := <-got; topic != "sensors/s2/more" {
		t.Fatalf("got %s", topic)
	}
	select {
	case topic := <-got:
		t.Fatalf("unexpected %s", topic)
	default:
	}
}
