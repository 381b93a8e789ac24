package walsink

import (
	"bufio"
	"bytes"
	"context"
	"testing"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestProbeLimits: mosquitto announces its max_inflight_messages as MQTT
// 5's Receive Maximum and max_qos as Maximum QoS, to the probe's own
// client id.
func TestProbeLimits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		opts    []mosquitto.Option
		recvMax int
		maxQoS  int
	}{
		{"stock in-flight limit", []mosquitto.Option{mosquitto.DefaultInflight()}, 20, 2},
		{"max_inflight_messages 1000", nil, 1000, 2},
		{"max_qos 1", []mosquitto.Option{mosquitto.DefaultInflight(), mosquitto.Conf("max_qos 1")}, 20, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := mosquitto.Start(t, tt.opts...)
			o := Options{Broker: b.URL(), ClientID: "probe-test"}
			if err := o.normalize(); err != nil {
				t.Fatal(err)
			}
			lim, err := probeLimits(context.Background(), &o)
			if err != nil {
				t.Fatal(err)
			}
			if lim.receiveMax != tt.recvMax || lim.maxQoS != tt.maxQoS {
				t.Errorf("limits %+v; want receive maximum %d, maximum QoS %d", lim, tt.recvMax, tt.maxQoS)
			}
		})
	}
}

// TestReadConnackV5: properties of every type are skipped, the two the
// sink uses read; a 3.1.1 CONNACK is errNoMQTT5.
func TestReadConnackV5(t *testing.T) {
	props := []byte{
		0x11, 0, 0, 0, 5, // session expiry
		0x12, 0, 2, 'i', 'd', // assigned client id
		0x26, 0, 1, 'k', 0, 1, 'v', // user property
		0x24, 1, // maximum QoS
		0x0B, 0x81, 0x01, // subscription identifier (variable byte integer)
		0x21, 0, 7, // receive maximum
	}
	body := append([]byte{0, 0, byte(len(props))}, props...)
	pkt := append([]byte{0x20, byte(len(body))}, body...)
	lim, err := readConnackV5(bufio.NewReader(bytes.NewReader(pkt)))
	if err != nil || lim.receiveMax != 7 || lim.maxQoS != 1 {
		t.Errorf("got %+v, %v", lim, err)
	}
	if _, err := readConnackV5(bufio.NewReader(bytes.NewReader([]byte{0x20, 2, 0, 1}))); err == nil {
		t.Error("a 3.1.1 CONNACK refusing the version: no error")
	}
}
