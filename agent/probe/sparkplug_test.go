package probe

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/io/walsink"
)

// TestDecideSparkplug: a refused subscription fails (the node would never
// be born), a downgraded one or a host not online warns, and a broker
// without MQTT 5 is fine.
func TestDecideSparkplug(t *testing.T) {
	s := Sparkplug{Sink: "scada", Group: "g", Node: "n", PrimaryHost: "h", Endpoint: Endpoint{ClientID: "eddy-n-scada"}}
	for _, tc := range []struct {
		name string
		obs  SparkplugObservations
		want string // "level text" of one finding
		fit  bool
	}{
		{"fits", SparkplugObservations{Granted: map[string]int{"spBv1.0/g/NCMD/n": 1}, HostState: "online"},
			"ok primary host h is online", true},
		{"ncmd refused", SparkplugObservations{Granted: map[string]int{"spBv1.0/g/NCMD/n": 0x80}},
			"fail the broker refuses the node's subscription to spBv1.0/g/NCMD/n", false},
		{"downgraded", SparkplugObservations{Granted: map[string]int{"spBv1.0/STATE/h": 0}},
			"warn the broker grants QoS 0 on spBv1.0/STATE/h", true},
		{"host away", SparkplugObservations{HostState: "none"}, "warn primary host h is not online (retained STATE: none)", true},
		{"no mqtt 5", SparkplugObservations{}, "ok the broker speaks MQTT 3.1.1 only", true},
		{"max qos 0", SparkplugObservations{Announced: &walsink.Announced{MaximumQoS: 0}}, "warn the broker announces Maximum QoS 0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := DecideSparkplug(s, tc.obs)
			found := false
			for _, f := range fs {
				found = found || strings.HasPrefix(string(f.Level)+" "+f.Text, tc.want)
			}
			if !found || Fit(fs) != tc.fit {
				t.Errorf("findings %+v; want %q, fit %v", fs, tc.want, tc.fit)
			}
		})
	}
}
