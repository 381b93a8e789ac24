package mqtt5

import (
	"math"
	"testing"
	"time"

	mp "github.com/mochi-mqtt/server/v2/packets"
)

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
