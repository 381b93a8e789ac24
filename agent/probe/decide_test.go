package probe

import (
	"slices"
	"strings"
	"testing"
)

// pass and lose build trials: w messages all arrived, or only got of them.
func pass(qos byte, w int) Trial {
	return Trial{QoS: qos, Window: w, Acked: w, Completed: w, Arrived: w}
}
func lose(qos byte, w, got int) Trial {
	return Trial{QoS: qos, Window: w, Acked: w, Completed: w, Arrived: got}
}

func TestNextWindow(t *testing.T) {
	// limit20 is a broker that keeps 20 in flight and drops the rest.
	limit20 := func(w int) Trial {
		if w <= 20 {
			return pass(2, w)
		}
		return lose(2, w, 20)
	}
	for _, tc := range []struct {
		name   string
		broker func(int) Trial
		limit  int
		tried  []int
		window Window
	}{
		{"mosquitto's default found exactly", limit20, 1000, []int{1, 2, 5, 10, 20, 50, 35, 27, 23, 21}, Window{Max: 20, Limited: true}},
		{"no limit up to the cap", func(w int) Trial { return pass(1, w) }, 1000, []int{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}, Window{Max: 1000}},
		{"cap between ladder steps", func(w int) Trial { return pass(1, w) }, 30, []int{1, 2, 5, 10, 20, 30}, Window{Max: 30}},
		{"limit 7", func(w int) Trial {
			if w <= 7 {
				return pass(2, w)
			}
			return lose(2, w, 7)
		}, 1000, []int{1, 2, 5, 10, 7, 8}, Window{Max: 7, Limited: true}},
		{"even one fails", func(w int) Trial { return lose(2, w, 0) }, 1000, []int{1}, Window{Limited: true}},
		{"closed at 2", func(w int) Trial {
			if w == 1 {
				return pass(2, w)
			}
			return Trial{QoS: 2, Window: w, Closed: true, Arrived: 1}
		}, 1000, []int{1, 2}, Window{Max: 1, Limited: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var trials []Trial
			var tried []int
			for {
				w, ok := NextWindow(trials, tc.limit)
				if !ok {
					break
				}
				if len(tried) > 40 {
					t.Fatalf("no end: %v", tried)
				}
				tried = append(tried, w)
				trials = append(trials, tc.broker(w))
			}
			if !slices.Equal(tried, tc.tried) {
				t.Errorf("tried %v, want %v", tried, tc.tried)
			}
			if got := WindowOf(trials); got != tc.window {
				t.Errorf("window %+v, want %+v", got, tc.window)
			}
		})
	}
}

func TestTrialPassed(t *testing.T) {
	for _, tc := range []struct {
		t    Trial
		want bool
	}{
		{pass(2, 20), true},
		{lose(2, 50, 20), false},
		{Trial{Window: 5, Arrived: 5, Duplicates: 1}, false}, // a repeat is not exactly once
		{Trial{Window: 5, Arrived: 5, Closed: true}, false},  // the connection must stay up
	} {
		if got := tc.t.Passed(); got != tc.want {
			t.Errorf("%+v: Passed %v, want %v", tc.t, got, tc.want)
		}
	}
}

// has reports whether fs holds a finding of level l whose text contains substr.
func has(fs []Finding, l Level, substr string) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Level == l && strings.Contains(f.Text, substr) })
}

func TestDecideUpstream(t *testing.T) {
	qos1Unlimited := []Trial{pass(1, 1), pass(1, 1000)}
	stockQoS2 := []Trial{pass(2, 1), pass(2, 20), lose(2, 50, 20), lose(2, 21, 20)}
	sizesOK := []SizeTrial{{Bytes: 1 << 10, Acked: true, Arrived: true}, {Bytes: 1 << 20, Acked: true, Arrived: true}}
	sizes64K := []SizeTrial{{Bytes: 16 << 10, Acked: true, Arrived: true}, {Bytes: 64 << 10, Acked: true, Arrived: true}, {Bytes: 256 << 10, Closed: true}}
	allowed := &TopicCheck{Topic: "r/gw", Acked: true, Arrived: true}
	for _, tc := range []struct {
		name     string
		cfg      UpstreamConfig
		obs      UpstreamObservations
		fit      bool
		qos      int
		inflight int
		payload  int64
		find     []Finding // each must be among the findings (text: a substring)
	}{
		{
			name: "stock mosquitto, defaults",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20},
			obs:  UpstreamObservations{QoS1: qos1Unlimited, QoS2: stockQoS2, Mode: QoS2OK, Sizes: sizesOK, Topic: allowed},
			fit:  true, qos: 2, inflight: 20,
			find: []Finding{{OK, "20 at QoS 2"}, {OK, "PUBREC"}, {OK, "allowed"}},
		},
		{
			name: "stock mosquitto, max_inflight 100: would lose results",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 100},
			obs:  UpstreamObservations{QoS1: qos1Unlimited, QoS2: stockQoS2, Mode: QoS2OK, Sizes: sizesOK},
			fit:  false, qos: 2, inflight: 20,
			find: []Finding{{Fail, "set max_inflight = 20"}},
		},
		{
			name: "mosquitto max_qos 1: QoS 2 refused",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20},
			obs:  UpstreamObservations{QoS1: qos1Unlimited, Mode: QoS2Refused, Sizes: sizesOK},
			fit:  false, qos: 1, inflight: 20,
			find: []Finding{{Fail, "set qos = 1"}, {OK, "1000 or more at QoS 1"}},
		},
		{
			name: "max_qos 1 with qos = 1 configured",
			cfg:  UpstreamConfig{QoS: 1, MaxInflight: 20},
			obs:  UpstreamObservations{QoS1: qos1Unlimited, Mode: QoS2Refused, Sizes: sizesOK},
			fit:  true, qos: 1, inflight: 20,
			find: []Finding{{OK, "qos = 1 is right"}},
		},
		{
			// RabbitMQ 3.10's MQTT plugin answers a QoS 2 PUBLISH with
			// PUBACK; the sink's QoS 2 session ends at the first PUBACK.
			name: "RabbitMQ: QoS 2 downgraded to QoS 1",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20},
			obs:  UpstreamObservations{QoS1: qos1Unlimited, Mode: QoS2Downgraded, Sizes: sizesOK, Topic: allowed},
			fit:  false, qos: 1, inflight: 20,
			find: []Finding{{Fail, "downgrades to QoS 1"}, {Fail, "stalls"}},
		},
		{
			name: "window not reached by the cap, max_inflight above it",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 5000},
			obs:  UpstreamObservations{QoS2: []Trial{pass(2, 1000)}, Mode: QoS2OK},
			fit:  true, qos: 2, inflight: 5000,
			find: []Finding{{Warn, "untested"}},
		},
		{
			name: "nothing arrives at QoS 2",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20},
			obs:  UpstreamObservations{QoS2: []Trial{lose(2, 1, 0)}, Mode: QoS2OK},
			fit:  false, qos: 2, inflight: 20,
			find: []Finding{{Fail, "not even one"}},
		},
		{
			name: "payload limit below max_payload",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20, MaxPayload: 128 << 10},
			obs:  UpstreamObservations{QoS2: stockQoS2, Mode: QoS2OK, Sizes: sizes64K},
			fit:  false, qos: 2, inflight: 20, payload: 64 << 10,
			find: []Finding{{Fail, "set max_payload = 65536"}},
		},
		{
			name: "payload limit without max_payload: advice",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20},
			obs:  UpstreamObservations{QoS2: stockQoS2, Mode: QoS2OK, Sizes: sizes64K},
			fit:  true, qos: 2, inflight: 20, payload: 64 << 10,
			find: []Finding{{Warn, "set max_payload = 65536"}},
		},
		{
			name: "mosquitto ACL: acked, dropped",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20},
			obs:  UpstreamObservations{QoS2: stockQoS2, Mode: QoS2OK, Topic: &TopicCheck{Topic: "r/gw", Acked: true}},
			fit:  false, qos: 2, inflight: 20,
			find: []Finding{{Fail, "topic r/gw: publish acknowledged but never delivered"}},
		},
		{
			name: "AWS IoT policy: publish closes the connection",
			cfg:  UpstreamConfig{QoS: 1, MaxInflight: 20},
			obs:  UpstreamObservations{QoS1: qos1Unlimited, Mode: QoS2Refused, Topic: &TopicCheck{Topic: "r/gw", Closed: true}},
			fit:  false, qos: 1, inflight: 20,
			find: []Finding{{Fail, "topic r/gw: the broker closes the connection"}},
		},
		{
			name: "subscription to the topic refused: not seen",
			cfg:  UpstreamConfig{QoS: 2, MaxInflight: 20},
			obs:  UpstreamObservations{QoS2: stockQoS2, Mode: QoS2OK, Topic: &TopicCheck{Topic: "r/gw", Acked: true, SubscribeRefused: true}},
			fit:  true, qos: 2, inflight: 20,
			find: []Finding{{Warn, "not seen"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := DecideUpstream(tc.cfg, tc.obs)
			if got := Fit(v.Findings); got != tc.fit {
				t.Errorf("fit %v, want %v: %+v", got, tc.fit, v.Findings)
			}
			if v.UseQoS != tc.qos || v.UseMaxInflight != tc.inflight || v.UseMaxPayload != tc.payload {
				t.Errorf("use qos %d, max_inflight %d, max_payload %d; want %d, %d, %d", v.UseQoS, v.UseMaxInflight, v.UseMaxPayload, tc.qos, tc.inflight, tc.payload)
			}
			for _, f := range tc.find {
				if !has(v.Findings, f.Level, f.Text) {
					t.Errorf("no %s finding with %q in %+v", f.Level, f.Text, v.Findings)
				}
			}
		})
	}
}

func TestDecideSource(t *testing.T) {
	conn := func(id string, shared bool, got int, granted ...int) SourceConn {
		return SourceConn{ClientID: id, Shared: shared, Received: got, Granted: granted}
	}
	filters := []string{"sensors/+/telemetry"}
	for _, tc := range []struct {
		name   string
		obs    SourceObservations
		fit    bool
		shared string
		find   []Finding
	}{
		{
			name: "one connection, message arrives",
			obs:  SourceObservations{Filters: filters, QoS: 1, Published: 2, Conns: []SourceConn{conn("c", false, 2, 1)}},
			fit:  true,
			find: []Finding{{OK, "QoS 1 granted"}, {OK, "every test message arrived"}},
		},
		{
			name:   "mosquitto: shared subscription works",
			obs:    SourceObservations{Filters: filters, QoS: 1, Published: 4, Plain: &SourceConn{ClientID: "p", Received: 4, Granted: []int{1}}, Conns: []SourceConn{conn("c0", true, 2, 1), conn("c1", true, 2, 1)}},
			fit:    true,
			shared: "ok",
			find:   []Finding{{OK, "spread over 2 connections"}},
		},
		{
			// RabbitMQ 3.10 grants $share/GROUP/FILTER as a literal filter
			// no topic matches: the shared connections get nothing.
			name:   "RabbitMQ: $share taken literally",
			obs:    SourceObservations{Filters: filters, QoS: 1, Published: 4, Plain: &SourceConn{ClientID: "p", Received: 4, Granted: []int{1}}, Conns: []SourceConn{conn("c0", true, 0, 1), conn("c1", true, 0, 1)}},
			fit:    false,
			shared: "literal",
			find:   []Finding{{Fail, "set connections = 1"}, {Fail, "literal"}},
		},
		{
			name:   "group ignored: every connection gets every message",
			obs:    SourceObservations{Filters: filters, QoS: 1, Published: 4, SharedDuplicates: 4, Plain: &SourceConn{ClientID: "p", Received: 4, Granted: []int{1}}, Conns: []SourceConn{conn("c0", true, 4, 1), conn("c1", true, 4, 1)}},
			fit:    false,
			shared: "not_shared",
			find:   []Finding{{Fail, "does not share"}},
		},
		{
			name:   "publish not allowed: untested",
			obs:    SourceObservations{Filters: filters, QoS: 1, Published: 4, Plain: &SourceConn{ClientID: "p", Granted: []int{1}}, Conns: []SourceConn{conn("c0", true, 0, 1), conn("c1", true, 0, 1)}},
			fit:    true,
			shared: "untested",
			find:   []Finding{{Warn, "not tested"}},
		},
		{
			name: "subscription refused by ACL",
			obs:  SourceObservations{Filters: filters, QoS: 1, Published: 2, Conns: []SourceConn{conn("c", false, 0, 0x80)}},
			fit:  false,
			find: []Finding{{Fail, "subscription refused"}},
		},
		{
			name: "QoS 2 asked, QoS 1 granted",
			obs:  SourceObservations{Filters: filters, QoS: 2, Published: 2, Conns: []SourceConn{conn("c", false, 2, 1)}},
			fit:  true,
			find: []Finding{{Warn, "granted below"}},
		},
		{
			name:   "one shared connection idle",
			obs:    SourceObservations{Filters: filters, QoS: 1, Published: 4, Plain: &SourceConn{ClientID: "p", Received: 4, Granted: []int{1}}, Conns: []SourceConn{conn("c0", true, 4, 1), conn("c1", true, 0, 1)}},
			fit:    true,
			shared: "ok",
			find:   []Finding{{Warn, "got none"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := DecideSource(tc.obs)
			if got := Fit(v.Findings); got != tc.fit {
				t.Errorf("fit %v, want %v: %+v", got, tc.fit, v.Findings)
			}
			if v.Shared != tc.shared {
				t.Errorf("shared %q, want %q", v.Shared, tc.shared)
			}
			for _, f := range tc.find {
				if !has(v.Findings, f.Level, f.Text) {
					t.Errorf("no %s finding with %q in %+v", f.Level, f.Text, v.Findings)
				}
			}
		})
	}
}

func TestTopicFor(t *testing.T) {
	for _, tc := range []struct {
		filter, topic string
		ok            bool
	}{
		{"sensors/+/telemetry", "sensors/eddy-probe/telemetry", true},
		{"sensors/#", "sensors/eddy-probe", true},
		{"#", "eddy-probe", true},
		{"a/b", "a/b", true},
		{"$SYS/#", "", false},
	} {
		got, ok := TopicFor(tc.filter)
		if got != tc.topic || ok != tc.ok {
			t.Errorf("TopicFor(%q) = %q, %v; want %q, %v", tc.filter, got, ok, tc.topic, tc.ok)
		}
	}
}

func TestTestPayloadSize(t *testing.T) {
	for _, n := range []int{0, 10, 1 << 10, 1 << 20} {
		p := testPayload("abcd", 3, 7, n)
		if n > 60 && len(p) != n {
			t.Errorf("size %d: payload of %d bytes", n, len(p))
		}
		if !strings.HasPrefix(string(p), `{"eddy_probe":"abcd","trial":3,"seq":7`) {
			t.Errorf("payload %.60s", p)
		}
	}
}
