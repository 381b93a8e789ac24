package walsink

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestWindowLearner: the window halves at a close with more than one flow
// open (to 1 at a close before any answer), never below 1, unless the
// broker announced its limit, which caps it; it grows by one per
// growEvery completions, never above the limit.
func TestWindowLearner(t *testing.T) {
	type step struct {
		op      string // "close open answered", "done n", "announce n"
		want    int
		changed bool
	}
	for _, tt := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"halves at each close with flows open", 100, []step{
			{op: "close 100 30", want: 50, changed: true},
			{op: "close 50 10", want: 25, changed: true},
			{op: "close 25 1", want: 12, changed: true},
		}},
		{"a close with one flow open or none is no sign of a limit", 100, []step{
			{op: "close 1 0", want: 100},
			{op: "close 0 0", want: 100},
		}},
		{"a close before any answer: 1 at once", 20, []step{
			{op: "close 20 0", want: 1, changed: true},
			{op: "close 1 0", want: 1},
		}},
		{"grows by one per growEvery completions, up to max", 4, []step{
			{op: "close 4 3", want: 2, changed: true},
			{op: fmt.Sprintf("done %d", growEvery-1), want: 2},
			{op: "done 1", want: 3, changed: true},
			{op: fmt.Sprintf("done %d", growEvery), want: 4, changed: true},
			{op: fmt.Sprintf("done %d", 5*growEvery), want: 4},
		}},
		{"an announced limit caps the window; closes after answers do not lower it", 1000, []step{
			{op: "announce 20", want: 20, changed: true},
			{op: fmt.Sprintf("done %d", 3*growEvery), want: 20},
			{op: "close 20 5", want: 20},
		}},
		{"an announced limit: a close before any answer tries one flow, an answer restores the limit", 1000, []step{
			{op: "announce 20", want: 20, changed: true},
			{op: "close 20 0", want: 1, changed: true},
			{op: "answer", want: 20, changed: true},
			{op: "answer", want: 20},
		}},
		{"growth stops at an announced limit", 1000, []step{
			{op: "close 1000 5", want: 500, changed: true},
			{op: "announce 100", want: 100, changed: true},
			{op: fmt.Sprintf("done %d", 3*growEvery), want: 100},
		}},
		{"an announced limit above max changes nothing", 20, []step{
			{op: "announce 65535", want: 20},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindowLearner(tt.max)
			for i, st := range tt.steps {
				var a, b int
				var changed bool
				switch {
				case strings.HasPrefix(st.op, "close"):
					fmt.Sscanf(st.op, "close %d %d", &a, &b)
					changed = w.closed(a, b)
				case strings.HasPrefix(st.op, "done"):
					fmt.Sscanf(st.op, "done %d", &a)
					for range a / 100 {
						changed = w.completed(100) || changed
					}
					changed = w.completed(a%100) || changed
				case st.op == "answer":
					changed = w.firstAnswer()
				case strings.HasPrefix(st.op, "announce"):
					fmt.Sscanf(st.op, "announce %d", &a)
					changed = w.announce(a)
				}
				if w.cur != st.want || changed != st.changed {
					t.Errorf("step %d (%s): window %d changed %v; want %d %v", i, st.op, w.cur, changed, st.want, st.changed)
				}
			}
		})
	}
}

// logBuffer collects a sink's log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func openLogged(t testing.TB, dir string, opts Options) (*Sink, *logBuffer) {
	t.Helper()
	lb := &logBuffer{}
	s, err := Open(dir, opts, slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("sink log:\n%s", lb.String())
		}
	})
	return s, lb
}

// TestSink_LearnsBrokerWindow: a QoS 2 sink whose max_inflight exceeds
// the limit of a mosquitto with stock settings (20 in flight; mosquitto
// answers PUBREC for a QoS 2 PUBLISH over it and drops the message, with
// no close) learns the limit from the broker (its MQTT 5 Receive Maximum:
// in the CONNACK of its own MQTT 5 session, or, at 3.1.1, of a probe)
// before its first flow, says so, and delivers 20,000 results, each exactly
// once, in order, to a QoS 2 subscriber.
//
// max_inflight 20, the window set right, is the baseline of the delivery
// rate the subtests log (BENCHMARKS.md has the figures).
func TestSink_LearnsBrokerWindow(t *testing.T) {
	for _, tt := range []struct {
		maxInflight int
		version     byte
	}{{1000, 5}, {100, 5}, {20, 5}, {1000, 4}, {20, 4}} {
		maxInflight := tt.maxInflight
		t.Run(fmt.Sprintf("max_inflight_%d_v%d", maxInflight, tt.version), func(t *testing.T) {
			b := mosquitto.Start(t, mosquitto.DefaultInflight())
			c := startCollector(t, b.URL(), "up/#")
			s, lb := openLogged(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + sanitize(t.Name()),
				SegmentBytes: 256 << 10, MaxInflight: maxInflight, ProtocolVersion: tt.version})
			start := time.Now()
			want := writeEpochs(t, s, 1, 20, 1000)
			got := c.waitFor(t, len(want), 60*time.Second)
			elapsed := time.Since(start)
			checkExactlyOnce(t, got, want)
			waitDrained(t, s, 10*time.Second)
			if st := s.Stats(); st.Window != 20 || st.Delivered != uint64(len(want)) || st.ProtocolVersion != int(tt.version) {
				t.Errorf("window %d, delivered %d, version %d; want 20, %d, %d", st.Window, st.Delivered, st.ProtocolVersion, len(want), tt.version)
			}
			line := "in-flight window set to the broker's announced limit"
			if tt.version == 5 {
				line = "in-flight window lowered to the broker's Receive Maximum (MQTT 5 CONNACK)"
			}
			if learnt := maxInflight > 20; learnt && (strings.Count(lb.String(), line) != 1 || !strings.Contains(lb.String(), "window=20")) {
				t.Errorf("the learned window is not in the log once:\n%s", lb.String())
			}
			t.Logf("MQTT %d, max_inflight %d: %d results in %v (%.0f/s), window %d", tt.version, maxInflight, len(want), elapsed.Round(time.Millisecond),
				float64(len(want))/elapsed.Seconds(), s.Stats().Window)
		})
	}
}

// TestSink_WindowHalvesWhenBrokerCloses: against a broker that answers a
// QoS 2 PUBLISH over its limit with PUBREC, drops it and closes the
// connection, and announces no limit (in-process: no broker at hand does
// it), the sink halves its window at each such close until it fits, logs
// the window, publishes the flows whose PUBREC came just before the close
// again (DUP, same id: the broker that kept them delivers nothing twice),
// and every result arrives exactly once. The refusal of QoS 2 is never
// named.
func TestSink_WindowHalvesWhenBrokerCloses(t *testing.T) {
	fb := startFakeBroker(t, &fakeBroker{limit: 5})
	s, lb := openLogged(t, t.TempDir(), Options{Broker: fb.url(), ClientID: "halves", MaxInflight: 16,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	want := writeEpochs(t, s, 1, 3, 200)
	waitDrained(t, s, 30*time.Second)
	distinct, repeated, publishes := fb.counts()
	if distinct != len(want) || repeated != 0 {
		t.Errorf("delivered %d distinct, %d more than once; want %d, 0", distinct, repeated, len(want))
	}
	st := s.Stats()
	if st.Window > 5 || st.Window < 2 || st.Refusal != "" {
		t.Errorf("window %d, refusal %q; want 2..5, none", st.Window, st.Refusal)
	}
	log := lb.String()
	if !strings.Contains(log, "in-flight window lowered") || strings.Contains(log, "does not accept QoS 2") {
		t.Errorf("log lacks the lowered window or names a refusal:\n%s", log)
	}
	fb.mu.Lock()
	closes := fb.closes
	fb.mu.Unlock()
	t.Logf("window %d after %d closes; %d PUBLISH packets for %d results", st.Window, closes, publishes, len(want))
}

// TestSink_BrokerDowngradesQoS2: a broker that answers QoS 2 PUBLISHes with
// PUBACK (RabbitMQ's MQTT plugin) has taken those messages, once: they
// count delivered; no new flow starts, nothing is published again in a
// loop, and the sink names the downgrade in one error line and in
// Stats.Refusal (which fails /readyz). The same in at-least-once mode.
func TestSink_BrokerDowngradesQoS2(t *testing.T) {
	for _, immediate := range []bool{false, true} {
		t.Run(fmt.Sprintf("immediate_%v", immediate), func(t *testing.T) {
			fb := startFakeBroker(t, &fakeBroker{puback: true})
			s, lb := openLogged(t, t.TempDir(), Options{Broker: fb.url(), ClientID: "downgrade", MaxInflight: 10,
				Immediate: immediate})
			writeEpochs(t, s, 1, 5, 100)
			waitRefusal(t, s, "the broker downgrades QoS 2 to 1: set qos = 1", 10*time.Second)
			// Whatever is still in flight is answered; then nothing moves.
			await.True(t, 5*time.Second, `s.Stats().Inflight == 0`, func() bool { return s.Stats().Inflight == 0 })
			before := s.Stats()
			_, _, publishesBefore := fb.counts()
			// A loop would publish again within this observation.
			if await.Holds(500*time.Millisecond, func() bool { _, _, p := fb.counts(); return p > publishesBefore }) {
				t.Error("the sink publishes again after the downgrade")
			}
			st := s.Stats()
			distinct, repeated, publishes := fb.counts()
			if publishes != publishesBefore || publishes > 10 || repeated != 0 {
				t.Errorf("%d PUBLISH packets (%d before the pause), %d delivered twice; want at most one window, once", publishes, publishesBefore, repeated)
			}
			if st.Delivered != uint64(distinct) || st.Delivered != before.Delivered || st.BacklogMessages != 500-int64(distinct) {
				t.Errorf("stats %+v; want %d delivered, the rest in the backlog", st, distinct)
			}
			if n := strings.Count(lb.String(), "the broker downgrades QoS 2 to 1"); n != 1 ||
				!strings.Contains(lb.String(), "level=ERROR") {
				t.Errorf("%d downgrade lines; want one at ERROR:\n%s", n, lb.String())
			}
		})
	}
}

// TestSink_SessionPresentZero: a CONNACK with session present = 0 is said
// for what it is: at INFO when no flow was open (nothing at stake; aedes
// answers so to a client without subscriptions), at WARN with what the
// sink re-sends when flows were open.
func TestSink_SessionPresentZero(t *testing.T) {
	fb := startFakeBroker(t, &fakeBroker{noSession: true, silent: true})
	s, lb := openLogged(t, t.TempDir(), Options{Broker: fb.url(), ClientID: "nosession", MaxInflight: 5,
		ReconnectMin: 10 * time.Millisecond, ProtocolVersion: 4})
	await.True(t, 5*time.Second, `s.Stats().Connected`, func() bool { return s.Stats().Connected })
	if log := lb.String(); !strings.Contains(log, "level=INFO msg=\"walsink: the broker answered session present = 0; no flow was open") ||
		strings.Contains(log, "level=WARN") {
		t.Errorf("no flow open: want one INFO line, no warning:\n%s", log)
	}
	writeEpochs(t, s, 1, 1, 3)
	await.True(t, 5*time.Second, `p == 3`, func() bool { _, _, p := fb.counts(); return p == 3 })
	fb.dropAll()
	await.True(t, 5*time.Second, `strings.Contains(lb.String(), "session present = 0 with")`, func() bool { return strings.Contains(lb.String(), "session present = 0 with") })
	if log := lb.String(); !strings.Contains(log, "session present = 0 with flows open") ||
		!strings.Contains(log, "published_again=3 released_again=0") {
		t.Errorf("flows open: want a warning naming what is re-sent:\n%s", log)
	}
}
