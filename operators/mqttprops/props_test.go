package mqttprops

import (
	"bytes"
	"testing"

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
	p := New(b[8 : 8+n])
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
		p := New(bad)
		for p.Next() {
		}
		if p.Err == nil {
			t.Errorf("% x: no error", bad)
		}
	}
}
