package mqtt5

import (
	"bytes"
	"math"
	"testing"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"
)

// TestProps walks what mochi's codec encodes, every kind of value, and
// stops at a malformed block.
func TestProps(t *testing.T) {
	pk := mp.Packet{FixedHeader: mp.FixedHeader{Type: mp.Publish, Qos: 1}, ProtocolVersion: 5, PacketID: 1, TopicName: "t"}
	pk.Properties = mp.Properties{PayloadFormat: 1, PayloadFormatFlag: true, MessageExpiryInterval: 60, ContentType: "application/json",
		TopicAlias: 7, TopicAliasFlag: true, SubscriptionIdentifier: []int{300},
		User: []mp.UserProperty{{Key: "site", Val: "north"}, {Key: "line", Val: ""}}}
	var buf bytes.Buffer
	if err := pk.PublishEncode(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// fixed header (2), topic (3), packet id (2), then the block's length.
	n := int(b[7])
	seen := map[byte]int{}
	var users []string
	p := NewProps(b[8 : 8+n])
	for p.Next() {
		seen[p.ID]++
		switch p.ID {
		case PropContentType:
			if string(String(p.Value)) != "application/json" {
				t.Errorf("content type %q", String(p.Value))
			}
		case PropTopicAlias:
			if p.Value[1] != 7 {
				t.Errorf("topic alias % x", p.Value)
			}
		case PropUser:
			k, v := Pair(p.Value)
			users = append(users, string(k)+"="+string(v))
		}
	}
	if p.Err != nil || len(seen) != 6 || len(users) != 2 || users[0] != "site=north" || users[1] != "line=" {
		t.Errorf("err %v, seen %v, users %v", p.Err, seen, users)
	}
	for _, bad := range [][]byte{{0x26, 0, 4, 's'}, {0x7f, 0}, {0x23, 0}} {
		p := NewProps(bad)
		for p.Next() {
		}
		if p.Err == nil {
			t.Errorf("% x: no error", bad)
		}
	}
}

// TestConnect: what the CONNECT asks for, as mochi decodes it.
func TestConnect(t *testing.T) {
	for _, tt := range []struct {
		c      Connect
		expiry uint32
		flag   bool
	}{
		{Connect{ClientID: "a"}, math.MaxUint32, true},
		{Connect{ClientID: "a", SessionExpiry: time.Hour}, 3600, true},
		{Connect{ClientID: "a", CleanStart: true}, 0, false},
	} {
		tt.c.ReceiveMaximum, tt.c.TopicAliasMaximum, tt.c.KeepAlive = 100, 10, 30*time.Second
		b := tt.c.Encode()
		pk := mp.Packet{ProtocolVersion: 5}
		if err := pk.FixedHeader.Decode(b[0]); err != nil {
			t.Fatal(err)
		}
		if err := pk.ConnectDecode(b[2:]); err != nil {
			t.Fatal(err)
		}
		p := pk.Properties
		if p.SessionExpiryInterval != tt.expiry || p.SessionExpiryIntervalFlag != tt.flag || p.ReceiveMaximum != 100 ||
			p.TopicAliasMaximum != 10 || pk.Connect.Clean != tt.c.CleanStart || pk.Connect.Keepalive != 30 {
			t.Errorf("%+v: decoded %+v %+v", tt.c, pk.Connect, p)
		}
	}
}

func TestReasonName(t *testing.T) {
	for code, want := range map[byte]string{0x8E: "session_taken_over", 0x97: "quota_exceeded", 0x05: "reason_0x05"} {
		if got := ReasonName(code); got != want {
			t.Errorf("ReasonName(%#x) = %q, want %q", code, got, want)
		}
	}
}
