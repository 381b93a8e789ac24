package source

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// checkExactlyOnce fails unless got holds every payload 0..n-1 at least
// once, repeats only with Dup set, and Offsets strictly increasing.
func checkExactlyOnce(t *testing.T, got []Message, n int) (dups int) {
	t.Helper()
	seen := make([]bool, n)
	var last uint64
	for i, m := range got {
		if m.Offset <= last {
			t.Fatalf("message %d: offset %d after %d, want unique increasing offsets", i, m.Offset, last)
		}
		last = m.Offset
		var k int
		if _, err := fmt.Sscanf(string(m.Payload), "%d", &k); err != nil || k < 0 || k >= n {
			t.Fatalf("message %d: payload %q", i, m.Payload)
		}
		if seen[k] {
			if !m.Dup {
				t.Fatalf("message %d: payload %d repeated without DUP", i, k)
			}
			dups++
			continue
		}
		seen[k] = true
	}
	for k, ok := range seen {
		if !ok {
			t.Fatalf("payload %d never received", k)
		}
	}
	return dups
}

// TestSharedMQTT_10kQoS1ExactlyOnce is the correctness test of
// connections = N: 10,000 QoS 1 messages published to a
// shared subscription served by 3 connections arrive exactly once in total,
// spread over every connection, with Offsets unique across connections.
func TestSharedMQTT_10kQoS1ExactlyOnce(t *testing.T) {
	const n = 10000
	broker := mosquitto.Start(t)
	src := NewSharedMQTT(MQTTOptions{Broker: broker.URL(), ClientID: "eddy-shared", Topics: []string{"sensors/+/telemetry"}, QoS: 1},
		SharedOptions{Connections: 3}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-shared")
	var last paho.Token
	for i := 0; i < n; i++ {
		last = pub.Publish(fmt.Sprintf("sensors/s%d/telemetry", i%10), 1, false, fmt.Sprint(i))
	}
	var got []Message
	for len(got) < n {
		batch := r.receive(t, 1, 30*time.Second)
		for i := range batch {
			batch[i].Ack() // as the agent does after its ingest-log append
		}
		got = append(got, batch...)
	}
	if !last.WaitTimeout(10*time.Second) || last.Error() != nil {
		t.Fatalf("publish: %v", last.Error())
	}
	if dups := checkExactlyOnce(t, got, n); dups != 0 {
		t.Fatalf("%d duplicates without any reconnect", dups)
	}
	for i, c := range src.conns {
		if c.received.Load() == 0 {
			t.Errorf("connection %d received nothing: the subscription is not shared", i)
		}
		t.Logf("connection %d (%s): %d messages", i, c.opts.ClientID, c.received.Load())
	}
	if st := src.Stats(); st.Received != n || st.Dropped != 0 || !st.Connected || st.Reconnects != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSharedMQTT_BrokerRestartRedeliversWithDup restarts mosquitto while the
// three connections hold unacked messages: after the reconnects every
// message is still received, repeats carry DUP (so the ingest log's dedup
// recognizes them), and the connection callback reports one outage.
func TestSharedMQTT_BrokerRestartRedeliversWithDup(t *testing.T) {
	const n = 300
	broker := mosquitto.Start(t)
	var mu sync.Mutex
	var changes []bool
	src := NewSharedMQTT(MQTTOptions{
		Broker: broker.URL(), ClientID: "eddy-shared-restart", Topics: []string{"t/#"}, QoS: 1,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond,
		OnConnectionChange: func(up bool) { mu.Lock(); changes = append(changes, up); mu.Unlock() },
	}, SharedOptions{Connections: 3, Group: "g1"}, testLogger(t))
	r := startSource(t, src)
	waitConnected(t, src)
	pub := mustPublisher(t, broker.URL(), "pub-shared-restart")
	mustPublish(t, pub, "t/a", 1, numbered(0, n)...)
	got := r.receive(t, n, 30*time.Second)
	for i := range got[:n/2] {
		got[i].Ack() // the rest stays unacked across the restart
	}

	broker.Restart()
	for {
		batch := r.receive(t, 1, 30*time.Second)
		for i := range batch {
			batch[i].Ack()
		}
		got = append(got, batch...)
		if len(got) >= n+n/2 { // at least the unacked half comes again
			break
		}
	}
	dups := checkExactlyOnce(t, got, n)
	t.Logf("%d redeliveries with DUP", dups)
	waitConnected(t, src)
	mu.Lock()
	defer mu.Unlock()
	if len(changes) < 3 || changes[0] != true || changes[len(changes)-1] != true {
		t.Fatalf("connection changes %v, want true, then false/true per outage", changes)
	}
}

func TestSharedMQTT_InvalidOptions(t *testing.T) {
	base := MQTTOptions{Broker: "tcp://x:1", ClientID: "c", Topics: []string{"t"}, QoS: 1}
	dollar := base
	dollar.Topics = []string{"$SYS/#"}
	noHost := base
	noHost.Broker = "tcp://"
	tests := []struct {
		name   string
		opts   MQTTOptions
		shared SharedOptions
		want   string
	}{
		{"no connections", base, SharedOptions{}, "connections 0"},
		{"bad group", base, SharedOptions{Connections: 2, Group: "a/b"}, "group"},
		{"dollar topic", dollar, SharedOptions{Connections: 2}, "'$' topic"},
		{"mqtt option", noHost, SharedOptions{Connections: 2}, "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewSharedMQTT(tt.opts, tt.shared, nil).Run(context.Background(), make(chan []Message))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "source: ") {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestNewSharedMQTT_ClientIDsAndFilters(t *testing.T) {
	src := NewSharedMQTT(MQTTOptions{Broker: "tcp://x:1", ClientID: "eddy-gw/1", Topics: []string{"a/+", "b/#"}, QoS: 1},
		SharedOptions{Connections: 2}, nil)
	var got []string
	for _, c := range src.conns {
		got = append(got, c.opts.ClientID+" "+strings.Join(c.opts.Topics, ","))
	}
	want := "[eddy-gw/1-0 $share/eddy-gw_1/a/+,$share/eddy-gw_1/b/# eddy-gw/1-1 $share/eddy-gw_1/a/+,$share/eddy-gw_1/b/#]"
	if fmt.Sprint(got) != want {
		t.Fatalf("connections %v, want %v", got, want)
	}
}
