package walsink

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestRefusalDetector: a broker is named as refusing QoS 2 only after
// connections in a row close soon after their first PUBLISH with no PUBREC
// or PUBCOMP; any acknowledgement, a close without a PUBLISH, or a close
// long after it starts the count again.
func TestRefusalDetector(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	type conn struct {
		publishAt time.Duration // -1: nothing published
		acked     bool
		closeAt   time.Duration
	}
	quick := conn{publishAt: 0, closeAt: 10 * time.Millisecond}
	for _, tt := range []struct {
		name  string
		conns []conn
		want  []bool // after each close
	}{
		{"closed after each PUBLISH", []conn{quick, quick, quick}, []bool{false, true, true}},
		{"an acknowledgement in between", []conn{quick, {publishAt: 0, acked: true, closeAt: time.Second}, quick}, []bool{false, false, false}},
		{"closed without a PUBLISH", []conn{{publishAt: -1, closeAt: 0}, quick}, []bool{false, false}},
		{"closed long after the PUBLISH", []conn{quick, {publishAt: 0, closeAt: qos2RefusalWindow + time.Second}, quick}, []bool{false, false, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var d refusalDetector
			now := t0
			for i, c := range tt.conns {
				d.connected()
				if c.publishAt >= 0 {
					d.published(now.Add(c.publishAt))
					d.published(now.Add(c.publishAt + time.Millisecond))
				}
				if c.acked {
					d.ackReceived()
				}
				if got := d.closed(now.Add(c.closeAt)); got != tt.want[i] {
					t.Errorf("connection %d: refused = %v, want %v", i, got, tt.want[i])
				}
				now = now.Add(time.Minute)
			}
		})
	}
}

// TestConnackMeaning: every MQTT 3.1.1 refusal code has its own meaning,
// which names the code.
func TestConnackMeaning(t *testing.T) {
	seen := map[string]bool{}
	for code := byte(1); code <= 6; code++ {
		m := connackMeaning(code)
		if !strings.Contains(m, fmt.Sprintf("%d", code)) || seen[m] {
			t.Errorf("code %d: %q", code, m)
		}
		seen[m] = true
	}
}

// waitRefusal waits until the sink reports a refusal containing want.
func waitRefusal(t *testing.T, s *Sink, want string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	await.Until(t, timeout, func() error {
		if st := s.Stats(); !strings.Contains(st.Refusal, want) {
			return fmt.Errorf("no refusal %q: stats %+v", want, st)
		}
		return nil
	})
	return time.Since(start)
}

// TestSink_BrokerRefusesQoS2: against mosquitto with max_qos 1 (which, like
// AWS IoT Core and Azure IoT Hub, closes the connection of a client that
// publishes at QoS 2) the sink names the refusal within seconds, delivers
// nothing, and keeps the results in the WAL, counted. At 3.1.1 it learns
// it from the closes; at MQTT 5 the CONNACK's Maximum QoS says it.
func TestSink_BrokerRefusesQoS2(t *testing.T) {
	for _, tt := range []struct {
		version byte
		want    string
	}{
		{4, ErrQoS2Refused.Error()},
		{5, "the broker announces Maximum QoS 1 in its MQTT 5 CONNACK"},
	} {
		t.Run(fmt.Sprintf("v%d", tt.version), func(t *testing.T) {
			b := mosquitto.Start(t, mosquitto.Conf("max_qos 1"))
			s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()),
				ReconnectMin: 100 * time.Millisecond, ProtocolVersion: tt.version})
			want := writeEpochs(t, s, 1, 2, 10)
			took := waitRefusal(t, s, tt.want, 10*time.Second)
			st := s.Stats()
			if !strings.Contains(st.Refusal, "qos = 1") {
				t.Errorf("refusal %q does not say what to do", st.Refusal)
			}
			if st.Delivered != 0 || st.BacklogMessages != int64(len(want)) {
				t.Errorf("stats %+v: want nothing delivered and %d in the backlog", st, len(want))
			}
			t.Logf("named after %v: %s", took, st.Refusal)
		})
	}
}

// TestSink_ConnackRefusals: a broker that refuses the CONNECT is named with
// the return code's meaning (mosquitto with a password file: a wrong
// password, and no credentials at all), and the refusal ends once the
// credentials are right.
func TestSink_ConnackRefusals(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	if out, err := exec.Command("mosquitto_passwd", "-b", "-c", pw, "eddy", "secret").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
	}
	if err := os.Chmod(pw, 0o644); err != nil {
		t.Fatal(err)
	}
	b := mosquitto.Start(t, mosquitto.Conf("allow_anonymous false", "password_file "+pw))
	for _, tt := range []struct {
		name, user, password, want string
		version                    byte
	}{
		{"wrong password", "eddy", "wrong", "not authorized (5)", 4},
		{"no credentials", "", "", "not authorized (5)", 4},
		{"wrong password v5", "eddy", "wrong", "not_authorized (0x87)", 5},
		{"no credentials v5", "", "", "not_authorized (0x87)", 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()),
				Username: tt.user, Password: tt.password, ReconnectMin: 100 * time.Millisecond, ProtocolVersion: tt.version})
			took := waitRefusal(t, s, tt.want, 10*time.Second)
			t.Logf("named after %v: %s", took, s.Stats().Refusal)
		})
	}
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-right", Username: "eddy", Password: "secret"})
	writeEpochs(t, s, 1, 1, 10)
	waitDelivered(t, s, 10, 10*time.Second)
	if r := s.Stats().Refusal; r != "" {
		t.Errorf("refusal %q with the right credentials", r)
	}
}
