package source

import (
	"fmt"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestMQTT_ConnectionIdentity: every message names the connection it came
// on and whether the broker resumed the session there, on both reading
// paths (tcp://: the connection parses the CONNACK itself; ws://: paho's
// ConnectToken). The first connection of a new client id finds no
// session; after a broker restart the persisted session is resumed on the
// second connection, which redelivers the unacked message.
func TestMQTT_ConnectionIdentity(t *testing.T) {
	for _, scheme := range []string{"tcp", "ws"} {
		t.Run(scheme, func(t *testing.T) {
			wsPort := loopback.MustPort(t)
			broker := mosquitto.Start(t, mosquitto.Conf(fmt.Sprintf("listener %d 127.0.0.1", wsPort), "protocol websockets"))
			url := broker.URL()
			if scheme == "ws" {
				url = fmt.Sprintf("ws://127.0.0.1:%d", wsPort)
			}
			src := NewMQTT(MQTTOptions{Broker: url, ClientID: "eddy-conn-" + scheme, Topics: []string{"t"}, QoS: 1,
				ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}, testLogger(t))
			r := startSource(t, src)
			waitConnected(t, src)
			pub := mustPublisher(t, broker.URL(), "pub-conn-"+scheme)
			mustPublish(t, pub, "t", 1, "a")
			m := r.receive(t, 1, 30*time.Second)[0] // not acked
			first := m.Conn
			if first.Session != 0 || first.Seq == 0 || m.Resumed {
				t.Fatalf("first connection: conn %+v resumed %v, want session 0, not resumed", m.Conn, m.Resumed)
			}
			broker.Restart()
			m = r.receive(t, 1, 30*time.Second)[0]
			if string(m.Payload) != "a" || m.Conn.Session != 0 || m.Conn.Seq <= first.Seq || !m.Resumed || !m.Dup {
				t.Fatalf("after the restart: %q conn %+v resumed %v dup %v, want the redelivery on a later connection than %+v, resumed",
					m.Payload, m.Conn, m.Resumed, m.Dup, first)
			}
			m.Ack()
		})
	}
}

// TestSharedMQTT_ConnectionIdentity: connection i of a shared subscription
// is session i.
func TestSharedMQTT_ConnectionIdentity(t *testing.T) {
	broker := mosquitto.Start(t)
	src := NewSharedMQTT(MQTTOptions{Broker: broker.URL(), ClientID: "eddy-conn-shared", Topics: []string{"t"}, QoS: 1},
		SharedOptions{Connections: 2}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-conn-shared")
	mustPublish(t, pub, "t", 1, numbered(0, 50)...)
	sessions := map[uint16]int{}
	for _, m := range r.receive(t, 50, 30*time.Second) {
		if m.Conn.Seq != 1 || m.Conn.Session > 1 || m.Resumed {
			t.Fatalf("conn %+v resumed %v, want session 0 or 1, its first connection, not resumed", m.Conn, m.Resumed)
		}
		sessions[m.Conn.Session]++
		m.Ack()
	}
	if len(sessions) != 2 {
		t.Fatalf("messages per session %v, want both sessions used", sessions)
	}
}
