package sparkplug

import (
	"strings"
	"testing"
)

func TestTopic_RoundTrip(t *testing.T) {
	for _, c := range []struct {
		s string
		t Topic
	}{
		{"spBv1.0/plant1/NBIRTH/gw-7", Topic{Type: NBIRTH, Group: "plant1", Node: "gw-7"}},
		{"spBv1.0/plant1/NDEATH/gw-7", Topic{Type: NDEATH, Group: "plant1", Node: "gw-7"}},
		{"spBv1.0/g/NDATA/n", Topic{Type: NDATA, Group: "g", Node: "n"}},
		{"spBv1.0/g/NCMD/n", Topic{Type: NCMD, Group: "g", Node: "n"}},
		{"spBv1.0/g/DBIRTH/n/sensor-3", Topic{Type: DBIRTH, Group: "g", Node: "n", Device: "sensor-3"}},
		{"spBv1.0/g/DDEATH/n/d", Topic{Type: DDEATH, Group: "g", Node: "n", Device: "d"}},
		{"spBv1.0/g/DDATA/n/d", Topic{Type: DDATA, Group: "g", Node: "n", Device: "d"}},
		{"spBv1.0/g/DCMD/n/d", Topic{Type: DCMD, Group: "g", Node: "n", Device: "d"}},
		{"spBv1.0/STATE/scada-1", Topic{Type: STATE, Node: "scada-1"}},
	} {
		if got := c.t.String(); got != c.s {
			t.Errorf("%+v.String() = %q, want %q", c.t, got, c.s)
		}
		got, err := ParseTopic(c.s)
		if err != nil || got != c.t {
			t.Errorf("ParseTopic(%q) = %+v, %v; want %+v", c.s, got, err, c.t)
		}
	}
}

func TestTopic_ParseErrors(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{"spAv1.0/g/NBIRTH/n", "not in the spBv1.0 namespace"},
		{"spBv1.0/g/NBIRTH", "too few levels"},
		{"spBv1.0/g/NBIRTH/n/d", "NBIRTH takes 3 levels"},
		{"spBv1.0/g/DDATA/n", "DDATA takes 4 levels"},
		{"spBv1.0/g/NOPE/n", "unknown message type NOPE"},
		{"spBv1.0/g/STATE/n", "unknown message type STATE"},
		{"spBv1.0//NDATA/n", "a level is empty"},
		{"spBv1.0/g/DDATA/n/+", "a level contains"},
		{"spBv1.0/STATE/", "host id is empty"},
	} {
		_, err := ParseTopic(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTopic(%q) error = %v, want one containing %q", c.s, err, c.want)
		}
	}
}

// TestDeviceID: a key is one topic level, and distinct keys stay distinct.
func TestDeviceID(t *testing.T) {
	seen := map[string]string{}
	for _, c := range []struct{ key, want string }{
		{"sensor-3", "sensor-3"},
		{"site/a", "site%2Fa"},
		{"a+b#c", "a%2Bb%23c"},
		{"100%", "100%25"},
		{"site%2Fa", "site%252Fa"},
		{"", "%"},
		{"%", "%25"},
	} {
		got := DeviceID([]byte(c.key))
		if got != c.want {
			t.Errorf("DeviceID(%q) = %q, want %q", c.key, got, c.want)
		}
		if ValidID(got) != "" {
			t.Errorf("DeviceID(%q) = %q is not a valid id", c.key, got)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("keys %q and %q share device id %q", other, c.key, got)
		}
		seen[got] = c.key
	}
}
