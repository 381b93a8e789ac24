package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/record"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// collector is a paho subscriber that records each output once by its id
// (the broker may repeat messages after a restart).
type collector struct {
	mu     sync.Mutex
	byID   map[string]string // id → topic
	want   int
	all    chan struct{}
	errors []string
}

func subscribe(t *testing.T, brokerURL, topic string, want int) *collector {
	t.Helper()
	c := &collector{byID: map[string]string{}, want: want, all: make(chan struct{})}
	opts := paho.NewClientOptions().AddBroker(brokerURL).SetClientID("eddy-test-sub").
		SetCleanSession(false).SetAutoReconnect(true).SetMaxReconnectInterval(time.Second).
		SetOrderMatters(false)
	client := paho.NewClient(opts)
	if tok := client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	t.Cleanup(func() { client.Disconnect(100) })
	tok := client.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		var rec struct {
			ID string `json:"id"`
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if err := json.Unmarshal(m.Payload(), &rec); err != nil {
			c.errors = append(c.errors, fmt.Sprintf("bad payload %q: %v", m.Payload(), err))
			return
		}
		if _, dup := c.byID[rec.ID]; dup {
			return
		}
		c.byID[rec.ID] = m.Topic()
		if len(c.byID) == c.want {
			close(c.all)
		}
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	return c
}

func (c *collector) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.all:
	case <-time.After(timeout):
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("received %d of %d outputs within %v", len(c.byID), c.want, timeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errors) > 0 {
		t.Fatalf("subscriber errors: %s", strings.Join(c.errors, "; "))
	}
}

// writeResults sends results [from, to) of pipeline "temp_1m" in batches.
func writeResults(t *testing.T, s Sink, deviceID string, from, to, batch int) {
	t.Helper()
	names := []string{"avg_temp", "n"}
	for i := from; i < to; i += batch {
		var items []record.Item
		for j := i; j < min(i+batch, to); j++ {
			r := &record.Result{
				Pipeline: "temp_1m", Key: []byte("sensor-" + strconv.Itoa(j%10)),
				Start: testStart + int64(j)*60000, End: testStart + int64(j+1)*60000,
				Kind: record.KindFinal, Names: names, Values: []float64{20 + float64(j)/100, float64(j)},
			}
			items = append(items, record.Item{Payload: record.AppendJSON(nil, deviceID, r), Result: r})
		}
		if err := s.Write(items); err != nil {
			t.Fatalf("Write of results %d..: %v", i, err)
		}
	}
}

func TestMQTT_PublishQoS1(t *testing.T) {
	b := mosquitto.Start(t)
	const n = 2000
	c := subscribe(t, b.URL(), "eddy/#", n)
	s, err := NewMQTT(MQTTOptions{
		Broker: b.URL(), Topic: "eddy/${device_id}/${pipeline}/${key}", QoS: 1, DeviceID: "gw-1",
		PublishTimeout: 20 * time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeResults(t, s, "gw-1", 0, n, 100)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	c.wait(t, 20*time.Second)

	for j := range n {
		id := fmt.Sprintf("gw-1/temp_1m/sensor-%d/%d-%d/0", j%10, testStart+int64(j)*60000, testStart+int64(j+1)*60000)
		if topic, want := c.byID[id], "eddy/gw-1/temp_1m/sensor-"+strconv.Itoa(j%10); topic != want {
			t.Fatalf("output %s arrived on %q, want %q", id, topic, want)
		}
	}
	published, failed, connected := s.(*MQTT).Stats()
	if published != n || failed != 0 || !connected {
		t.Errorf("Stats = (%d, %d, %v), want (%d, 0, true)", published, failed, connected, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}

// The sink reconnects by itself after the broker restarts.
func TestMQTT_ReconnectAfterBrokerRestart(t *testing.T) {
	b := mosquitto.Start(t)
	c := subscribe(t, b.URL(), "eddy/#", 200)
	s, err := NewMQTT(MQTTOptions{
		Broker: b.URL(), ClientID: "eddy-test-pub", Topic: "eddy/${pipeline}/${window_start}", QoS: 1, DeviceID: "gw-1",
		PublishTimeout: 20 * time.Second, MaxReconnectInterval: time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeResults(t, s, "gw-1", 0, 100, 50)
	b.Restart()
	writeResults(t, s, "gw-1", 100, 200, 50) // waits for the reconnect
	c.wait(t, 20*time.Second)
	if published, failed, _ := s.(*MQTT).Stats(); published != 200 || failed != 0 {
		t.Errorf("Stats = (%d, %d), want (200, 0)", published, failed)
	}
}

func TestMQTT_NotConnected(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	s, err := NewMQTT(MQTTOptions{Broker: "tcp://" + addr, Topic: "t", QoS: 1, PublishTimeout: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Write([]record.Item{{Payload: []byte("{}")}, {Payload: []byte("{}")}})
	if !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Write with no broker = %v, want ErrNotConnected", err)
	}
	if published, failed, connected := s.(*MQTT).Stats(); published != 0 || failed != 2 || connected {
		t.Errorf("Stats = (%d, %d, %v), want (0, 2, false)", published, failed, connected)
	}
}

func TestNewMQTT_Errors(t *testing.T) {
	tests := []struct {
		name    string
		opts    MQTTOptions
		wantErr string
	}{
		{"no broker", MQTTOptions{Topic: "t"}, "broker is empty"},
		{"no scheme", MQTTOptions{Broker: "127.0.0.1:1883", Topic: "t"}, "want scheme://host:port"},
		{"qos 2", MQTTOptions{Broker: "tcp://127.0.0.1:1", Topic: "t", QoS: 2}, "exactly_once"},
		{"bad topic", MQTTOptions{Broker: "tcp://127.0.0.1:1", Topic: "a/${sensor}"}, "unknown variable ${sensor}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMQTT(tt.opts, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewMQTT error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
