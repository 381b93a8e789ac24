package walsink

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/io/mqtt5"

	mp "github.com/mochi-mqtt/server/v2/packets"
)

// decodeV5 decodes one encoded packet with mochi's codec, as a broker
// would: the tests' independent check of what the sink sends.
func decodeV5(t *testing.T, b []byte) *mp.Packet {
	t.Helper()
	r := bytes.NewReader(b)
	hb, _ := r.ReadByte()
	pk := &mp.Packet{ProtocolVersion: 5}
	if err := pk.FixedHeader.Decode(hb); err != nil {
		t.Fatal(err)
	}
	n, _, err := mp.DecodeLength(r)
	if err != nil {
		t.Fatal(err)
	}
	if n != r.Len() {
		t.Fatalf("remaining length %d, %d bytes follow", n, r.Len())
	}
	pk.FixedHeader.Remaining = n
	body := b[len(b)-n:]
	switch pk.FixedHeader.Type {
	case mp.Connect:
		err = pk.ConnectDecode(body)
	case mp.Publish:
		err = pk.PublishDecode(body)
	case mp.Pubrel:
		err = pk.PubrelDecode(body)
	case mp.Pingreq:
	default:
		t.Fatalf("packet type %d", pk.FixedHeader.Type)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

func TestV5_Connect(t *testing.T) {
	o := &Options{ClientID: "eddy-gw-7-up", Username: "u", Password: "p", KeepAlive: 30 * time.Second}
	if pk := decodeV5(t, encodeConnectV5(&Options{ClientID: "x", SessionExpiry: 7 * 24 * time.Hour})); pk.Properties.SessionExpiryInterval != 7*24*3600 {
		t.Errorf("session_expiry 7 days: interval %d", pk.Properties.SessionExpiryInterval)
	}
	pk := decodeV5(t, encodeConnectV5(o))
	c := pk.Connect
	if string(c.ProtocolName) != "MQTT" || pk.ProtocolVersion != 5 {
		t.Errorf("protocol %q %d", c.ProtocolName, pk.ProtocolVersion)
	}
	if c.Clean || c.ClientIdentifier != o.ClientID || c.Keepalive != 30 {
		t.Errorf("clean %v, client id %q, keepalive %d", c.Clean, c.ClientIdentifier, c.Keepalive)
	}
	if string(c.Username) != "u" || string(c.Password) != "p" || !c.UsernameFlag || !c.PasswordFlag {
		t.Errorf("credentials %q %q", c.Username, c.Password)
	}
	// A session that never expires: 3.1.1's clean session 0.
	if !pk.Properties.SessionExpiryIntervalFlag || pk.Properties.SessionExpiryInterval != math.MaxUint32 {
		t.Errorf("session expiry %v %d", pk.Properties.SessionExpiryIntervalFlag, pk.Properties.SessionExpiryInterval)
	}
}

// encodeFromBroker encodes a packet a broker sends, with mochi's codec.
func encodeFromBroker(t *testing.T, pk mp.Packet) []byte {
	t.Helper()
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case mp.Connack:
		err = pk.ConnackEncode(&buf)
	case mp.Puback:
		err = pk.PubackEncode(&buf)
	case mp.Pubrec:
		err = pk.PubrecEncode(&buf)
	case mp.Pubcomp:
		err = pk.PubcompEncode(&buf)
	case mp.Pingresp:
		err = pk.PingrespEncode(&buf)
	case mp.Disconnect:
		err = pk.DisconnectEncode(&buf)
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readV5(t *testing.T, b []byte) (*mp.Packet, error) {
	t.Helper()
	return mqtt5.ReadPacket(bufio.NewReader(bytes.NewReader(b)), maxIncomingV5)
}

func TestV5_Connack(t *testing.T) {
	ok := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Connack}, ProtocolVersion: 5, SessionPresent: true,
		Properties: mp.Properties{ReceiveMaximum: 20, MaximumQos: 1, MaximumQosFlag: true, MaximumPacketSize: 2000, TopicAliasMaximum: 10}}
	pk, err := readV5(t, encodeFromBroker(t, ok))
	if err != nil {
		t.Fatal(err)
	}
	info, err := connackV5(pk)
	if err != nil {
		t.Fatal(err)
	}
	want := connackInfo{present: true, version: 5, limits: brokerLimits{receiveMax: 20, maxQoS: 1, maxPacket: 2000, topicAliasMax: 10}}
	if info != want {
		t.Errorf("CONNACK %+v, want %+v", info, want)
	}
	// Nothing announced: QoS 2, no limits.
	pk, err = readV5(t, encodeFromBroker(t, mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Connack}, ProtocolVersion: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := connackV5(pk); err != nil || info.limits != (brokerLimits{maxQoS: 2}) {
		t.Errorf("bare CONNACK: %+v, %v", info, err)
	}

	for _, tt := range []struct {
		name string
		b    []byte
		want error
		msg  string
	}{
		{name: "3.1.1 broker", b: []byte{0x20, 2, 0, 1}, want: errV5Refused},
		{name: "3.1.1 CONNACK accepting", b: []byte{0x20, 2, 0, 0}, want: errV5Refused},
		{name: "3.1.1 not authorized", b: []byte{0x20, 2, 0, 5}, want: errConnRefused, msg: "not authorized (5)"},
		{name: "v5 unsupported version", b: encodeFromBroker(t, mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Connack}, ProtocolVersion: 5, ReasonCode: 0x84}), want: errV5Refused},
		{name: "v5 bad credentials", b: encodeFromBroker(t, mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Connack}, ProtocolVersion: 5, ReasonCode: 0x86,
			Properties: mp.Properties{ReasonString: "who are you"}}), want: errConnRefused, msg: "bad_user_name_or_password (0x86): check the sink's username and password (the broker says: who are you)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pk, err := readV5(t, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			_, err = connackV5(pk)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if tt.msg != "" && !bytes.Contains([]byte(err.Error()), []byte(tt.msg)) {
				t.Errorf("error %q lacks %q", err, tt.msg)
			}
		})
	}
}

func TestV5_Answers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		pk     mp.Packet
		raw    []byte // when mochi's encoder cannot say it
		reason byte
		text   string
	}{
		{name: "pubrec success", pk: mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pubrec}, PacketID: 7}},
		// mochi's encoder leaves out a reason code below 0x80 without
		// properties; mosquitto sends it (remaining length 3).
		{name: "pubrec no matching subscribers", pk: mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pubrec}, PacketID: 7},
			raw: []byte{0x50, 3, 0, 7, 0x10}, reason: 0x10},
		{name: "puback not authorized", pk: mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Puback}, PacketID: 7, ReasonCode: 0x87,
			Properties: mp.Properties{ReasonString: "acl"}}, reason: 0x87, text: "acl"},
		{name: "pubcomp id not found", pk: mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pubcomp}, PacketID: 7, ReasonCode: 0x92}, reason: 0x92},
		{name: "disconnect", pk: mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Disconnect}, ReasonCode: 0x97,
			Properties: mp.Properties{ReasonString: "slow down"}}, reason: 0x97, text: "slow down"},
		{name: "pingresp", pk: mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Pingresp}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.pk.ProtocolVersion = 5
			b := tt.raw
			if b == nil {
				b = encodeFromBroker(t, tt.pk)
			}
			pk, err := readV5(t, b)
			if err != nil {
				t.Fatal(err)
			}
			if pk.FixedHeader.Type != tt.pk.FixedHeader.Type || pk.PacketID != tt.pk.PacketID || pk.ReasonCode != tt.reason ||
				pk.Properties.ReasonString != tt.text {
				t.Errorf("read type %d id %d reason %#x %q, want %d %d %#x %q", pk.FixedHeader.Type, pk.PacketID, pk.ReasonCode,
					pk.Properties.ReasonString, tt.pk.FixedHeader.Type, tt.pk.PacketID, tt.reason, tt.text)
			}
		})
	}
	// A PUBLISH (or anything else a publisher never gets) is an error,
	// and so is a packet over the bound.
	if _, err := readV5(t, []byte{0x30, 3, 0, 1, 'a'}); err == nil {
		t.Error("PUBLISH from the broker read without error")
	}
	if _, err := mqtt5.ReadPacket(bufio.NewReader(bytes.NewReader([]byte{0x40, 0x80, 0x80, 0x04})), maxIncomingV5); err == nil {
		t.Error("PUBACK of 64 KiB read without error")
	}
	if got := (&disconnectError{code: 0x8E}).Error(); got != "walsink: the broker disconnected: session_taken_over (0x8e)" {
		t.Errorf("disconnect error %q", got)
	}
}

func TestV5_Publish(t *testing.T) {
	for _, tt := range []struct {
		name    string
		payload string
		id      string // "" = no user property
		expiry  uint32
	}{
		{name: "result", payload: `{"id":"gw-7/temp_1m/sensor-3/1795946400000-1795946460000/0","pipeline":"temp_1m"}`,
			id: "gw-7/temp_1m/sensor-3/1795946400000-1795946460000/0"},
		{name: "escaped id", payload: `{"id":"gw-7/p/a\"b\\c\u00e9/1-2/0","n":1}`, id: "gw-7/p/a\"b\\cé/1-2/0"},
		{name: "no id", payload: `{"pipeline":"p"}`},
		{name: "message expiry", payload: `{"id":"x","n":1}`, id: "x", expiry: 3599},
		{name: "not json", payload: "raw bytes"},
		{name: "unterminated", payload: `{"id":"abc`},
		{name: "large", payload: `{"id":"x","pad":"` + string(bytes.Repeat([]byte("a"), 20000)) + `"}`, id: "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var w v5Writer
			var out bytes.Buffer
			topic := []byte("up/gw-7/temp")
			if err := w.publish(&out, 2, 4242, true, true, topic, []byte(tt.payload), tt.expiry); err != nil {
				t.Fatal(err)
			}
			if got, want := publishSizeV5(topic, []byte(tt.payload), tt.expiry > 0), int64(out.Len()); got != want {
				t.Errorf("publishSizeV5 %d, encoded %d bytes", got, want)
			}
			pk := decodeV5(t, out.Bytes())
			fh := pk.FixedHeader
			if fh.Qos != 2 || !fh.Dup || !fh.Retain || pk.PacketID != 4242 || pk.TopicName != string(topic) || string(pk.Payload) != tt.payload {
				t.Errorf("PUBLISH qos %d dup %v retain %v id %d topic %q payload %q", fh.Qos, fh.Dup, fh.Retain, pk.PacketID, pk.TopicName, pk.Payload)
			}
			if pk.Properties.ContentType != "application/json" || pk.Properties.MessageExpiryInterval != tt.expiry {
				t.Errorf("content type %q, message expiry %d; want application/json, %d", pk.Properties.ContentType, pk.Properties.MessageExpiryInterval, tt.expiry)
			}
			var users []mp.UserProperty
			if tt.id != "" {
				users = []mp.UserProperty{{Key: "id", Val: tt.id}}
			}
			if len(pk.Properties.User) != len(users) || (len(users) == 1 && pk.Properties.User[0] != users[0]) {
				t.Errorf("user properties %+v, want %+v", pk.Properties.User, users)
			}
		})
	}
	var w v5Writer
	var out bytes.Buffer
	if err := w.pubrel(&out, 9); err != nil {
		t.Fatal(err)
	}
	if pk := decodeV5(t, out.Bytes()); pk.FixedHeader.Type != mp.Pubrel || pk.PacketID != 9 {
		t.Errorf("PUBREL %+v", pk.FixedHeader)
	}
	if !bytes.Equal(out.Bytes(), []byte{0x62, 2, 0, 9}) {
		t.Errorf("PUBREL success is the short form: % x", out.Bytes())
	}
	out.Reset()
	if err := w.pingreq(&out); err != nil || !bytes.Equal(out.Bytes(), []byte{0xC0, 0}) {
		t.Errorf("PINGREQ % x, %v", out.Bytes(), err)
	}
}

func TestV5_ReasonNames(t *testing.T) {
	for code, want := range map[byte]string{0x10: "no_matching_subscribers", 0x87: "not_authorized", 0x95: "packet_too_large",
		0x97: "quota_exceeded", 0x8E: "session_taken_over", 0x05: "reason_0x05"} {
		if got := mqtt5.ReasonName(code); got != want {
			t.Errorf("mqtt5.ReasonName(%#x) = %q, want %q", code, got, want)
		}
	}
}

func TestV5_PublishSizeAtTheVarintEdges(t *testing.T) {
	for _, n := range []int{0, 80, 100, 127, 128, 16300, 16383, 16384, 2097000, 2097152} {
		payload := bytes.Repeat([]byte("a"), n)
		var w v5Writer
		var out bytes.Buffer
		if err := w.publish(&out, 1, 1, false, false, []byte("t"), payload, 0); err != nil {
			t.Fatal(err)
		}
		if got := publishSizeV5([]byte("t"), payload, false); got != int64(out.Len()) {
			t.Errorf("payload %d: publishSizeV5 %d, encoded %d", n, got, out.Len())
		}
	}
}

// TestV5_TopicAliases: with the broker's Topic Alias Maximum, the first
// PUBLISH of a topic carries it with a new alias, the later ones the alias
// alone; topics beyond the maximum go out whole.
func TestV5_TopicAliases(t *testing.T) {
	w := v5Writer{aliasMax: 2}
	type sent struct {
		topic string
		alias uint16
	}
	var got []sent
	for _, topic := range []string{"a/1", "a/1", "b/2", "c/3", "a/1", "b/2", "c/3"} {
		var out bytes.Buffer
		if err := w.publish(&out, 2, 1, false, false, []byte(topic), []byte(`{"id":"x"}`), 0); err != nil {
			t.Fatal(err)
		}
		pk := decodeV5(t, out.Bytes())
		got = append(got, sent{pk.TopicName, pk.Properties.TopicAlias})
	}
	want := []sent{{"a/1", 1}, {"", 1}, {"b/2", 2}, {"c/3", 0}, {"", 1}, {"", 2}, {"c/3", 0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sent %v, want %v", got, want)
	}
}

// TestV5_TopicAliasBytes measures the bytes on the wire per result with
// and without a topic alias, for a typical topic template
// ("sites/${device_id}/${pipeline}/${key}") and result (BENCHMARKS.md).
func TestV5_TopicAliasBytes(t *testing.T) {
	topic := []byte("sites/gw-berlin-0042/temp_1m/sensor-17")
	payload := []byte(`{"id":"gw-berlin-0042/temp_1m/sensor-17/1795946400000-1795946460000/0","pipeline":"temp_1m","key":"sensor-17",` +
		`"window_start":"2026-11-29T10:00:00.000Z","window_end":"2026-11-29T10:01:00.000Z","window_start_ms":1795946400000,` +
		`"window_end_ms":1795946460000,"kind":"final","firing":0,"avg_temp":21.43,"max_temp":22.1,"n":12}`)
	size := func(w *v5Writer) int {
		var out bytes.Buffer
		if err := w.publish(&out, 2, 1, false, false, topic, payload, 0); err != nil {
			t.Fatal(err)
		}
		return out.Len()
	}
	plain := size(&v5Writer{})
	aliased := &v5Writer{aliasMax: 10}
	first := size(aliased)
	later := size(aliased)
	v311 := publishSizeV4(topic, payload)
	// A QoS 2 flow adds PUBREC, PUBREL, PUBCOMP: 4 bytes each at success.
	t.Logf("bytes per result (PUBLISH; + 12 for PUBREC, PUBREL, PUBCOMP): MQTT 3.1.1 %d; MQTT 5 %d without alias, %d with (first %d); topic %d bytes, payload %d",
		v311, plain, later, first, len(topic), len(payload))
	if later != plain-len(topic)+3 || first != plain+3 {
		t.Errorf("aliased %d (first %d), plain %d: want the topic's %d bytes less, the alias's 3 more", later, first, plain, len(topic))
	}
}
