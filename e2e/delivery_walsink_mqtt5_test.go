package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
	"github.com/eddy-edge/eddy/scripts/mqttjs"
)

// mqtt5Config runs a simulator through the embedded broker into processing
// time windows published by the exactly-once sink to %UPSTREAM%.
const mqtt5Config = `
agent {
  device_id = "v5"
  data_dir  = "%DATA%"
  admin     = "%ADMIN%"
  log_level = "info"
}
broker { listen = "%BROKER%" }
source "simulator" "sim" {
  devices = 3
  rate    = 100
}
sink "mqtt" "up" {
  broker = "%UPSTREAM%"
  topic  = "results/${device_id}/${pipeline}/${key}"%SINK%
}
pipeline "p" {
  from = source.simulator.sim
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "300ms"
  }
  aggregate { n = count() }
  to = [sink.mqtt.up]
}
checkpoint { interval = "200ms" }
`

// mqtt5Sub is an independent MQTT 5 subscriber (mochi's codec, not the
// agent's writer): it connects (retrying while the broker starts),
// subscribes at QoS 1 and keeps each PUBLISH's payload and properties.
type mqtt5Sub struct {
	mu   sync.Mutex
	msgs []mp.Packet
}

func startMQTT5Sub(t *testing.T, addr, filter string) *mqtt5Sub {
	t.Helper()
	var c net.Conn
	await.True(t, 15*time.Second, `err == nil`, func() bool {
		var err error
		c, err = net.Dial("tcp", addr)
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	send := func(pk *mp.Packet, enc func(*mp.Packet, *bytes.Buffer) error) {
		var buf bytes.Buffer
		if err := enc(pk, &buf); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(c)
	send(&mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Connect}, ProtocolVersion: 5,
		Connect: mp.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, ClientIdentifier: "v5-consumer", Keepalive: 60}},
		(*mp.Packet).ConnectEncode)
	if pk, err := readMQTT5(br); err != nil || pk.FixedHeader.Type != mp.Connack || pk.ReasonCode != 0 {
		t.Fatalf("consumer CONNECT: %+v, %v", pk, err)
	}
	send(&mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Subscribe, Qos: 1}, ProtocolVersion: 5, PacketID: 1,
		Filters: mp.Subscriptions{{Filter: filter, Qos: 1}}}, (*mp.Packet).SubscribeEncode)
	s := &mqtt5Sub{}
	go func() {
		for {
			pk, err := readMQTT5(br)
			if err != nil {
				return
			}
			if pk.FixedHeader.Type != mp.Publish {
				continue
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, *pk)
			s.mu.Unlock()
			if pk.FixedHeader.Qos > 0 {
				var buf bytes.Buffer
				ack := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Puback}, ProtocolVersion: 5, PacketID: pk.PacketID}
				_ = ack.PubackEncode(&buf)
				_, _ = c.Write(buf.Bytes())
			}
		}
	}()
	return s
}

func (s *mqtt5Sub) received() []mp.Packet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mp.Packet(nil), s.msgs...)
}

func readMQTT5(br *bufio.Reader) (*mp.Packet, error) {
	hb, err := br.ReadByte()
	if err != nil {
		return nil, err
	}
	pk := &mp.Packet{ProtocolVersion: 5}
	if err := pk.FixedHeader.Decode(hb); err != nil {
		return nil, err
	}
	n, _, err := mp.DecodeLength(br)
	if err != nil {
		return nil, err
	}
	pk.FixedHeader.Remaining = n
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	switch pk.FixedHeader.Type {
	case mp.Connack:
		err = pk.ConnackDecode(body)
	case mp.Publish:
		err = pk.PublishDecode(body)
	}
	return pk, err
}

// TestWALSink_MQTT5Properties: the exactly-once sink speaks MQTT 5 by
// default, to mosquitto and to the embedded broker alike, and every result
// an independent MQTT 5 consumer receives carries its id as the user
// property "id" (equal to the payload's) and the content type
// application/json; with protocol_version = 4 it speaks 3.1.1 and results
// carry no properties.
func TestWALSink_MQTT5Properties(t *testing.T) {
	for _, tt := range []struct {
		name     string
		embedded bool
		sink     string
		version  int
	}{
		{name: "mosquitto", version: 5},
		{name: "embedded", embedded: true, version: 5},
		{name: "mosquitto_protocol_version_4", sink: "\n  protocol_version = 4", version: 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			brokerAddr := loopback.Addr(t)
			upstream, subAddr := "embedded", brokerAddr
			if !tt.embedded {
				up := mosquitto.Start(t, mosquitto.DefaultInflight())
				upstream, subAddr = up.URL(), up.Addr()
			}
			ag := startAgent(t, dir, mqtt5Config, "%BROKER%", brokerAddr, "%UPSTREAM%", upstream, "%SINK%", tt.sink)
			sub := startMQTT5Sub(t, subAddr, "results/#")
			await.True(t, 30*time.Second, `len(sub.received()) >= 10`, func() bool { return len(sub.received()) >= 10 })
			for _, pk := range sub.received() {
				var res struct{ ID string }
				if err := json.Unmarshal(pk.Payload, &res); err != nil || res.ID == "" {
					t.Fatalf("result %q: %v", pk.Payload, err)
				}
				p := pk.Properties
				if tt.version == 4 {
					if len(p.User) != 0 || p.ContentType != "" {
						t.Errorf("result %s over 3.1.1 has properties %+v", res.ID, p)
					}
					continue
				}
				if p.ContentType != "application/json" || len(p.User) != 1 || p.User[0].Key != "id" || p.User[0].Val != res.ID {
					t.Errorf("result %s: content type %q, user properties %+v; want application/json and id = the payload's", res.ID, p.ContentType, p.User)
				}
			}
			if want := fmt.Sprintf("protocol_version=%d", tt.version); !ag.waitLog(want, 5*time.Second) ||
				!strings.Contains(ag.output(), "walsink: connected") {
				t.Errorf("the agent's log does not say it connected with %s", want)
			}
		})
	}
}

// TestWALSink_MQTT5MaximumPacketSize: results whose MQTT 5 PUBLISH is
// larger than the Maximum Packet Size the upstream broker announces
// (mosquitto's max_packet_size) are never published: the run delivers every
// other result and exits 0, and each oversized one is dead-lettered with
// reason too_large: by its pipeline into the dead-letter file, whole, once
// the sink knows the limit (its first CONNACK, normally before the first
// result), or by the sink's publisher if it was in the WAL before.
func TestWALSink_MQTT5MaximumPacketSize(t *testing.T) {
	up := mosquitto.Start(t, mosquitto.DefaultInflight(), mosquitto.Conf("max_packet_size 3000"))
	col := newCollector(t, up.URL(), "results/#")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	const windows = 4
	want := writeWindowReadings(t, in, 3, windows)
	bigKey := "big-" + strings.Repeat("k", 2000)
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte(strings.ReplaceAll(string(b), `"device":"dev-0"`, `"device":"`+bigKey+`"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if strings.HasPrefix(k, "dev-0/") {
			delete(want, k)
		}
	}
	cfg := replaceAll(drainConfig,
		"  to = [sink.mqtt.cloud]\n}", "  to = [sink.mqtt.cloud]\n  dead_letter = sink.file.dead\n}\nsink \"file\" \"dead\" { path = \"%DIR%/dead.jsonl\" }")
	out, err := runEddy(t, "run", "-c", writeConfig(t, dir, cfg, "%UPSTREAM%", up.URL(), "%SINK%", ""))
	if err != nil {
		t.Fatalf("eddy run: %v\n%s", err, out)
	}
	if strings.Contains(out, "not delivered upstream") {
		t.Errorf("the run reported undelivered results:\n%s", out)
	}
	await.True(t, 30*time.Second, `col.windowCount("drain") >= len(want)`, func() bool { return col.windowCount("drain") >= len(want) })
	got := col.windows("drain")
	if diff := differingWindows(t, want, got); diff > 0 || len(got) != len(want) {
		t.Errorf("%d of %d windows differ; %d delivered", diff, len(want), len(got))
	}
	dead := 0
	if b, err := os.ReadFile(filepath.Join(dir, "dead.jsonl")); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var dl struct{ Reason, Detail, Payload string }
			var res struct{ Key string }
			if json.Unmarshal([]byte(line), &dl) != nil || dl.Reason != "too_large" ||
				!strings.Contains(dl.Detail, `larger than the Maximum Packet Size (3000 bytes) the broker of sink "cloud" announces`) ||
				json.Unmarshal([]byte(dl.Payload), &res) != nil || res.Key != bigKey {
				t.Errorf("dead letter %.300q: want reason too_large, the limit and the sink, and the whole result", line)
			}
			dead++
		}
	}
	bySink := strings.Count(out, `msg="walsink: result dead-lettered" reason=too_large`)
	t.Logf("dead-lettered: %d by the pipeline, %d by the sink's publisher", dead, bySink)
	if dead+bySink != windows || dead == 0 {
		t.Errorf("%d dead letters in the file and %d by the sink, want %d (one per oversized window), most in the file", dead, bySink, windows)
	}
}

// TestWALSink_MQTT5PropertiesSeenByMQTTJS: MQTT.js, a client independent of
// the agent's code, subscribed to mosquitto, receives every result of a
// file job's exactly-once sink with message_expiry = "1h" carrying its id as
// the user property "id" (equal to the payload's), the content type
// application/json and a Message Expiry Interval of at most an hour. When
// the results first wait in the WAL (the broker down for a run that gives
// up after a 2 s drain_timeout, the next run delivering them), the interval
// is what is left of the hour: less than 3600 s.
func TestWALSink_MQTT5PropertiesSeenByMQTTJS(t *testing.T) {
	for _, tt := range []struct {
		name     string
		down     bool
		atMost   uint32
		sinkOpts string
	}{
		{name: "live", atMost: 3600},
		{name: "after_wait_in_wal", down: true, atMost: 3599, sinkOpts: "\n  drain_timeout = \"2s\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := mosquitto.Start(t)
			dir := t.TempDir()
			want := writeWindowReadings(t, filepath.Join(dir, "in.jsonl"), 3, 2)
			cfg := writeConfig(t, dir, drainConfig, "%UPSTREAM%", up.URL(), "%SINK%", "\n  message_expiry = \"1h\""+tt.sinkOpts)
			if tt.down {
				up.Stop()
				start := time.Now()
				var exit *exec.ExitError
				if _, err := runEddy(t, "run", "-c", cfg); !errors.As(err, &exit) || exit.ExitCode() != 3 {
					t.Fatalf("eddy run with the broker down: %v; want exit status 3", err)
				}
				if waited := time.Since(start); waited < 2*time.Second {
					t.Fatalf("the run with the broker down exited after %v, before its drain_timeout", waited)
				}
				up.Restart()
			}
			sub := mqttjs.Subscribe(t, up.URL(), "mqttjs-sub", "results/#")
			if out, err := runEddy(t, "run", "-c", cfg); err != nil {
				t.Fatalf("eddy run: %v\n%s", err, out)
			}
			got := sub.Await(len(want), 30*time.Second)
			if len(got) != len(want) {
				t.Errorf("MQTT.js received %d results, want %d", len(got), len(want))
			}
			for _, m := range got {
				var res struct{ ID string }
				if err := json.Unmarshal([]byte(m.Payload), &res); err != nil || res.ID == "" {
					t.Fatalf("result %q: %v", m.Payload, err)
				}
				if m.UserProperties["id"] != res.ID || len(m.UserProperties) != 1 || m.ContentType != "application/json" {
					t.Errorf("result %s: user properties %v, content type %q; want id = the payload's and application/json", res.ID, m.UserProperties, m.ContentType)
				}
				if m.MessageExpiryInterval == 0 || m.MessageExpiryInterval > tt.atMost {
					t.Errorf("result %s: Message Expiry Interval %d s, want 1..%d", res.ID, m.MessageExpiryInterval, tt.atMost)
				}
			}
			t.Logf("%d results, Message Expiry Interval of the first %d s", len(got), got[0].MessageExpiryInterval)
		})
	}
}
