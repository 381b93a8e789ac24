package e2e

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// stalledBroker accepts MQTT connections and then stops: it answers an
// MQTT 3.1.1 CONNECT with CONNACK and never reads again (the sink's writes
// fill the socket and block), and never answers anything else (an MQTT 5
// CONNECT waits for its CONNACK forever). A broker host that hangs.
func stalledBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				p, err := packets.ReadPacket(c)
				if cp, ok := p.(*packets.ConnectPacket); err == nil && ok && cp.ProtocolVersion == 4 {
					_ = packets.NewControlPacket(packets.Connack).Write(c)
				}
			}()
		}
	}()
	return "tcp://" + ln.Addr().String()
}

// TestWALSink_SIGTERMWithinBound: SIGTERM while a run whose input ended
// waits for upstream delivery (drain_timeout = 60s) stops the agent within
// the documented bound (2 s for delivery, plus the stop itself), exit
// status 0, whatever the sink waits for: a broker that stalled mid-write,
// or one that refuses QoS 2. The undelivered results are counted.
func TestWALSink_SIGTERMWithinBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		upstream func(t *testing.T) string
	}{
		{"stalled_broker", stalledBroker},
		{"broker_refuses_qos2", func(t *testing.T) string {
			return mosquitto.Start(t, mosquitto.DefaultInflight(), mosquitto.Conf("max_qos 1")).URL()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeWindowReadings(t, filepath.Join(dir, "in.jsonl"), 500, 10)
			cfg := writeConfig(t, dir, drainConfig, "%UPSTREAM%", tc.upstream(t), "%SINK%", "\n  drain_timeout = \"60s\"")
			p := startEddy(t, "run", "-c", cfg)
			if !p.waitLog("waiting for upstream delivery", 60*time.Second) {
				t.Fatal("the run never waited for upstream delivery")
			}
			start := time.Now()
			p.stop(syscall.SIGTERM, 30*time.Second)
			took := time.Since(start)
			t.Logf("exited %v after SIGTERM", took.Round(time.Millisecond))
			if took > 6*time.Second {
				t.Errorf("SIGTERM took %v; the bound is 2 s for delivery", took)
			}
			if !strings.Contains(p.output(), "results not delivered upstream yet") {
				t.Error("no count of undelivered results")
			}
		})
	}
}
