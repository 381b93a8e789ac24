package walsink

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// v5Subscriber is an MQTT 5 consumer on mochi's codec, independent of the
// sink's writer: it subscribes at QoS 1 and keeps every PUBLISH it gets,
// properties included.
type v5Subscriber struct {
	mu   sync.Mutex
	msgs []*mp.Packet
}

func startV5Subscriber(t *testing.T, b *mosquitto.Broker, filter string) *v5Subscriber {
	t.Helper()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	write := func(pk mp.Packet, enc func(*mp.Packet, *bytes.Buffer) error) {
		var buf bytes.Buffer
		must(enc(&pk, &buf))
		_, err := c.Write(buf.Bytes())
		must(err)
	}
	write(mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Connect}, ProtocolVersion: 5,
		Connect: mp.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, ClientIdentifier: "v5sub-" + sanitize(t.Name()), Keepalive: 60}},
		(*mp.Packet).ConnectEncode)
	br := bufio.NewReader(c)
	if pk := readAnyV5(t, br); pk.FixedHeader.Type != mp.Connack || pk.ReasonCode != 0 {
		t.Fatalf("subscriber CONNECT answered type %d reason %#x", pk.FixedHeader.Type, pk.ReasonCode)
	}
	write(mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Subscribe, Qos: 1}, ProtocolVersion: 5, PacketID: 1,
		Filters: mp.Subscriptions{{Filter: filter, Qos: 1}}}, (*mp.Packet).SubscribeEncode)
	if pk := readAnyV5(t, br); pk.FixedHeader.Type != mp.Suback {
		t.Fatalf("SUBSCRIBE answered type %d", pk.FixedHeader.Type)
	}
	s := &v5Subscriber{}
	go func() {
		for {
			pk, err := readV5Any(br)
			if err != nil {
				return
			}
			if pk.FixedHeader.Type != mp.Publish {
				continue
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, pk)
			s.mu.Unlock()
			if pk.FixedHeader.Qos == 1 {
				var buf bytes.Buffer
				ack := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Puback}, ProtocolVersion: 5, PacketID: pk.PacketID}
				_ = ack.PubackEncode(&buf)
				_, _ = c.Write(buf.Bytes())
			}
		}
	}()
	return s
}

func (s *v5Subscriber) waitFor(t *testing.T, n int, timeout time.Duration) []*mp.Packet {
	t.Helper()
	var got []*mp.Packet
	await.Until(t, timeout, func() error {
		s.mu.Lock()
		got = append([]*mp.Packet(nil), s.msgs...)
		s.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("v5 subscriber: %d of %d messages", len(got), n)
		}
		return nil
	})
	return got
}

func readAnyV5(t *testing.T, br *bufio.Reader) *mp.Packet {
	t.Helper()
	pk, err := readV5Any(br)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// readV5Any reads and decodes any MQTT 5 packet a subscriber gets.
func readV5Any(br *bufio.Reader) (*mp.Packet, error) {
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
	case mp.Suback:
		err = pk.SubackDecode(body)
	case mp.Publish:
		err = pk.PublishDecode(body)
	}
	return pk, err
}

// TestMQTT5_PropertiesReachTheSubscriber: at MQTT 5 every result carries
// its id as the user property "id" and the content type application/json,
// as an MQTT 5 subscriber (mochi's codec) sees them through mosquitto; the
// reason code 0x10 "no matching subscribers" (mosquitto answers it on the
// PUBACK of a QoS 1 publish nobody subscribed to) is counted, and is no
// error.
func TestMQTT5_PropertiesReachTheSubscriber(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	q1, lb := openLogged(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-props-q1", QoS: 1})
	writeEpochs(t, q1, 1, 1, 5)
	waitDelivered(t, q1, 5, 10*time.Second)
	st := q1.Stats()
	if st.ProtocolVersion != 5 || st.Reasons["puback/no_matching_subscribers"] != 5 || st.Refusal != "" {
		t.Errorf("version %d, reasons %v, refusal %q; want 5, 5 no_matching_subscribers, none", st.ProtocolVersion, st.Reasons, st.Refusal)
	}
	if strings.Contains(lb.String(), "level=WARN") || strings.Contains(lb.String(), "level=ERROR") {
		t.Errorf("no matching subscribers is logged as a problem:\n%s", lb.String())
	}
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-props"})
	sub := startV5Subscriber(t, b, "up/#")
	want := writeEpochs(t, s, 2, 2, 50)
	got := sub.waitFor(t, len(want), 20*time.Second)
	for i, pk := range got {
		id := payloadID(pk.Payload)
		if id != want[i] {
			t.Fatalf("message %d: id %q, want %q", i, id, want[i])
		}
		if pk.Properties.ContentType != "application/json" || pk.TopicName != "up/test" {
			// The sink uses topic aliases (mosquitto's Topic Alias
			// Maximum is 10); the broker resolves them.
			t.Errorf("message %s: content type %q, topic %q", id, pk.Properties.ContentType, pk.TopicName)
		}
		if u := pk.Properties.User; len(u) != 1 || u[0].Key != "id" || u[0].Val != id {
			t.Errorf("message %s: user properties %+v, want id = %s", id, u, id)
		}
	}
}

// TestMQTT5_ReceiveMaximumCapsTheWindow: against a stock mosquitto
// (Receive Maximum 20), a v5 sink with max_inflight 1000 takes the window
// from its own CONNACK, says so once (not per connection), never has more
// than 20 in flight, and keeps it across a reconnect.
func TestMQTT5_ReceiveMaximumCapsTheWindow(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	s, lb := openLogged(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-recvmax", MaxInflight: 1000,
		ReconnectMin: 10 * time.Millisecond})
	await.True(t, 10*time.Second, `s.Stats().Connected`, func() bool { return s.Stats().Connected })
	if st := s.Stats(); st.Window != 20 || st.ProtocolVersion != 5 {
		t.Fatalf("window %d, version %d before any publish; want 20, 5", st.Window, st.ProtocolVersion)
	}
	b.Stop()
	await.True(t, 10*time.Second, `!s.Stats().Connected`, func() bool { return !s.Stats().Connected })
	b.Restart()
	await.True(t, 20*time.Second, `s.Stats().Connected`, func() bool { return s.Stats().Connected })
	writeEpochs(t, s, 1, 2, 500)
	maxInflight := 0
	await.True(t, 30*time.Second, `st.BacklogMessages == 0`, func() bool {
		st := s.Stats()
		maxInflight = max(maxInflight, st.Inflight)
		return st.BacklogMessages == 0
	})
	if maxInflight > 20 {
		t.Errorf("%d flows in flight; the broker's Receive Maximum is 20", maxInflight)
	}
	if n := strings.Count(lb.String(), "in-flight window lowered to the broker's Receive Maximum"); n != 1 ||
		!strings.Contains(lb.String(), "window=20 receive_maximum=20 max_inflight=1000") {
		t.Errorf("%d window lines over two connections; want one:\n%s", n, lb.String())
	}
}

// TestMQTT5_MaximumQoSNamedAtConnect: a broker announcing Maximum QoS 1
// (mosquitto max_qos 1) to a sink at QoS 2 is named at connect time, with
// nothing written yet and so before any publish, in one ERROR line however
// often the sink reconnects; results written then stay in the WAL.
func TestMQTT5_MaximumQoSNamedAtConnect(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.Conf("max_qos 1"))
	s, lb := openLogged(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-maxqos",
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	waitRefusal(t, s, "the broker announces Maximum QoS 1 in its MQTT 5 CONNACK and this sink publishes at qos = 2", 10*time.Second)
	if r := s.Stats().Refusal; !strings.Contains(r, "set qos = 1 on this sink") {
		t.Errorf("refusal %q does not say what to do", r)
	}
	want := writeEpochs(t, s, 1, 1, 10)
	// Several reconnects (backoff 10..50 ms) within this observation.
	await.True(t, 5*time.Second, `strings.Count(b.Log(), "walsink-maxqos") >= 10`, func() bool { return strings.Count(b.Log(), "walsink-maxqos") >= 10 })
	st := s.Stats()
	if st.Delivered != 0 || st.BacklogMessages != int64(len(want)) || st.Inflight != 0 {
		t.Errorf("stats %+v: want nothing published, %d in the backlog", st, len(want))
	}
	if n := strings.Count(lb.String(), "announces Maximum QoS 1"); n != 1 || !strings.Contains(lb.String(), "level=ERROR") {
		t.Errorf("%d lines naming Maximum QoS; want one ERROR:\n%s", n, lb.String())
	}
}

// TestMQTT5_MaximumPacketSize: a result larger than the broker's Maximum
// Packet Size (mosquitto max_packet_size) is dead-lettered too_large and
// never published; the results around it are delivered, in order, and the
// backlog drains. At QoS 1 too.
func TestMQTT5_MaximumPacketSize(t *testing.T) {
	t.Parallel()
	for _, qos := range []byte{2, 1} {
		t.Run(fmt.Sprintf("qos_%d", qos), func(t *testing.T) {
			b := mosquitto.Start(t, mosquitto.Conf("max_packet_size 2000"))
			c := startCollector(t, b.URL(), "up/#")
			s, lb := openLogged(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()), QoS: qos})
			var want []string
			msgs := paddedMessages(1, 0, 3, &want)
			big := paddedMessages(1, 3, 1, new([]string))[0]
			big.Payload = append(big.Payload[:len(big.Payload)-1:len(big.Payload)-1], `,"pad":"`+strings.Repeat("x", 3000)+`"}`...)
			msgs = append(msgs, big)
			msgs = append(msgs, paddedMessages(1, 4, 3, &want)...)
			must(s.Write(1, msgs))
			must(s.PreCommit(1))
			must(s.Commit(1))
			got := c.waitFor(t, len(want), 20*time.Second)
			checkExactlyOnce(t, got, want)
			waitDrained(t, s, 10*time.Second)
			st := s.Stats()
			if st.TooLarge != 1 || st.Delivered != uint64(len(want)) || st.MaxPacketSize != 2000 {
				t.Errorf("stats %+v; want 1 too large, %d delivered, max packet 2000", st, len(want))
			}
			if !strings.Contains(lb.String(), "reason=too_large") || !strings.Contains(lb.String(), "Maximum Packet Size (2000 bytes)") {
				t.Errorf("the dead letter is not in the log:\n%s", lb.String())
			}
			if st.Connected != true {
				t.Error("the sink is not connected")
			}
		})
	}
}

// TestMQTT5_ACLRefusal: a broker whose access rules refuse the sink's
// topic answers each PUBREC with 0x87 "not authorized" at MQTT 5
// (mosquitto drops such a message silently at 3.1.1): the sink names it by
// name in its refusal, counts it per reason, and keeps the results in the
// WAL.
func TestMQTT5_ACLRefusal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acl := filepath.Join(dir, "acl")
	must(os.WriteFile(acl, []byte("topic read up/#\n"), 0o644))
	b := mosquitto.Start(t, mosquitto.Conf("acl_file "+acl))
	var mu sync.Mutex
	counted := map[string]int{}
	s, _ := openLogged(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-acl",
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond,
		OnReason: func(packet, reason string) {
			mu.Lock()
			counted[packet+"/"+reason]++
			mu.Unlock()
		}})
	want := writeEpochs(t, s, 1, 1, 5)
	waitRefusal(t, s, "pubrec reason not_authorized (0x87)", 10*time.Second)
	st := s.Stats()
	if st.Delivered != 0 || st.BacklogMessages != int64(len(want)) || st.Reasons["pubrec/not_authorized"] == 0 {
		t.Errorf("stats %+v: want nothing delivered, %d in the backlog, not_authorized counted", st, len(want))
	}
	mu.Lock()
	n := counted["pubrec/not_authorized"]
	mu.Unlock()
	if n == 0 {
		t.Error("OnReason did not see not_authorized")
	}
}

// TestMQTT5_FallsBackTo311: a broker that answers the MQTT 5 CONNECT with
// a 3.1.1 CONNACK "unacceptable protocol version" (the in-process 3.1.1
// broker, as mosquitto 1.5 and RabbitMQ 3.10 do) gets MQTT 3.1.1, said
// once, and every result.
func TestMQTT5_FallsBackTo311(t *testing.T) {
	for _, closeV5 := range []bool{false, true} {
		t.Run(fmt.Sprintf("close_unanswered_%v", closeV5), func(t *testing.T) { testFallsBackTo311(t, closeV5) })
	}
}

// With closeV5 the broker closes the MQTT 5 CONNECT without a CONNACK, as
// RabbitMQ's MQTT plugin does.
func testFallsBackTo311(t *testing.T, closeV5 bool) {
	fb := startFakeBroker(t, &fakeBroker{closeV5: closeV5})
	s, lb := openLogged(t, t.TempDir(), Options{Broker: fb.url(), ClientID: "fallback", ReconnectMin: 10 * time.Millisecond})
	want := writeEpochs(t, s, 1, 2, 50)
	waitDrained(t, s, 10*time.Second)
	if distinct, repeated, _ := fb.counts(); distinct != len(want) || repeated != 0 {
		t.Errorf("delivered %d distinct, %d repeated; want %d, 0", distinct, repeated, len(want))
	}
	fb.dropAll()
	await.True(t, 10*time.Second, `fb.conns >= 2`, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return fb.conns >= 2 })
	if st := s.Stats(); st.ProtocolVersion != 4 {
		t.Errorf("protocol version %d, want 4", st.ProtocolVersion)
	}
	line := "the broker refuses MQTT 5"
	if closeV5 {
		line = "the broker closed the MQTT 5 CONNECT without a CONNACK and accepts MQTT 3.1.1"
	}
	if n := strings.Count(lb.String(), line); n != 1 || strings.Contains(lb.String(), "level=ERROR") {
		t.Errorf("%d fallback lines; want one, no error:\n%s", n, lb.String())
	}
}

// TestMQTT5_MessageExpiry: results that waited longer than message_expiry
// in the WAL (the uplink down) are dead-lettered expired, never published;
// the fresher ones are published with the expiry left, as an MQTT 5
// subscriber sees it.
func TestMQTT5_MessageExpiry(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	dir := t.TempDir()
	const expiry = 2 * time.Second
	down := "tcp://127.0.0.1:" + strconv.Itoa(loopback.MustPort(t))
	s := mustOpen(t, dir, Options{Broker: down, ClientID: "walsink-expiry", MessageExpiry: expiry})
	writeEpochs(t, s, 1, 1, 5)
	await.True(t, 10*time.Second, `s.Stats().OldestAge > expiry`, func() bool { return s.Stats().OldestAge > expiry })
	fresh := writeEpochs(t, s, 2, 2, 5)
	must(s.Close())
	sub := startV5Subscriber(t, b, "up/#")
	s, lb := openLogged(t, dir, Options{Broker: b.URL(), ClientID: "walsink-expiry", MessageExpiry: expiry})
	must(s.Recover(2))
	got := sub.waitFor(t, len(fresh), 10*time.Second)
	waitDrained(t, s, 10*time.Second)
	for i, pk := range got {
		if id := payloadID(pk.Payload); id != fresh[i] {
			t.Errorf("message %d: %s, want %s (the expired ones are not published)", i, id, fresh[i])
		}
		if e := pk.Properties.MessageExpiryInterval; e < 1 || e > 2 {
			t.Errorf("message %d: message expiry %d s, want what is left of 2 s", i, e)
		}
	}
	if st := s.Stats(); st.Expired != 5 || st.Delivered != 5 {
		t.Errorf("stats %+v: want 5 expired, 5 delivered", st)
	}
	if n := strings.Count(lb.String(), "reason=expired"); n != 5 {
		t.Errorf("%d expired lines, want 5:\n%s", n, lb.String())
	}
}

// TestMQTT5_SessionExpiry: with session_expiry the broker drops the sink's
// session that long after a disconnect (the next CONNACK says session
// present = 0); without, it keeps it (present = 1).
func TestMQTT5_SessionExpiry(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	for _, tt := range []struct {
		expiry  time.Duration
		present bool
	}{{time.Second, false}, {0, true}} {
		id := fmt.Sprintf("walsink-session-%v", tt.expiry)
		dir := t.TempDir()
		s := mustOpen(t, dir, Options{Broker: b.URL(), ClientID: id, SessionExpiry: tt.expiry})
		await.True(t, 10*time.Second, `s.Stats().Connected`, func() bool { return s.Stats().Connected })
		must(s.Close())
		if tt.expiry > 0 {
			await.True(t, 10*time.Second, `strings.Contains(b.Log(), "Expiring client "+id)`, func() bool { return strings.Contains(b.Log(), "Expiring client "+id) })
		}
		s, lb := openLogged(t, dir, Options{Broker: b.URL(), ClientID: id, SessionExpiry: tt.expiry})
		// The connected flag is set before the line naming session present
		// is written; wait for the line.
		await.True(t, 10*time.Second, `"walsink: connected" logged`, func() bool { return strings.Contains(lb.String(), "walsink: connected") })
		if want := fmt.Sprintf("session_present=%v", tt.present); !strings.Contains(lb.String(), want) {
			t.Errorf("session_expiry %v: no %s in:\n%s", tt.expiry, want, lb.String())
		}
	}
}
