package walsink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
)

// TestQoS1Window: ids are unique in flight and cycle; PUBACKs in any
// order remove their message; the oldest unacknowledged seq is the
// position a restart resumes from.
func TestQoS1Window(t *testing.T) {
	w := newQoS1Window(3)
	var ids []uint16
	for seq := uint64(10); seq < 13; seq++ {
		ids = append(ids, w.publish(seq, []byte("t"), fmt.Appendf(nil, "m%d", seq), false).id)
	}
	if w.canPublish() {
		t.Fatal("canPublish with the window full")
	}
	if fmt.Sprint(ids) != "[1 2 3]" {
		t.Errorf("ids %v", ids)
	}
	for _, step := range []struct {
		ack       uint16
		wantSeq   uint64
		ok        bool
		oldest    uint64
		oldestAny bool
	}{
		{ack: 2, wantSeq: 11, ok: true, oldest: 10, oldestAny: true},
		{ack: 2, ok: false, oldest: 10, oldestAny: true}, // a late PUBACK
		{ack: 1, wantSeq: 10, ok: true, oldest: 12, oldestAny: true},
		{ack: 3, wantSeq: 12, ok: true},
	} {
		seq, _, ok := w.ack(step.ack)
		if ok != step.ok || (ok && seq != step.wantSeq) {
			t.Errorf("ack(%d) = %d, %v; want %d, %v", step.ack, seq, ok, step.wantSeq, step.ok)
		}
		if o, any := w.oldest(); o != step.oldest || any != step.oldestAny {
			t.Errorf("after ack(%d): oldest %d, %v", step.ack, o, any)
		}
	}
	m := w.publish(13, []byte("t"), []byte("m13"), true)
	if m.id != 4 || string(m.payload) != "m13" || !m.retain {
		t.Errorf("reused buffer: %+v", m)
	}
}

// TestSink_QoS1_PublishesInOrder: at QoS 1 to mosquitto with max_qos 1 (a
// broker without QoS 2) every committed message arrives, once (no crash, no
// reconnect), in order; the acknowledged position lets delivered segments
// go, and its records cost a few bytes per message.
func TestSink_QoS1_PublishesInOrder(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.DefaultInflight(), mosquitto.Conf("max_qos 1"))
	c := startCollector(t, b.URL(), "up/#")
	s := mustOpen(t, t.TempDir(), Options{Broker: b.URL(), ClientID: "walsink-" + t.Name(), QoS: 1, SegmentBytes: 64 << 10})
	want := writeEpochs(t, s, 1, 20, 500)
	got := c.waitFor(t, len(want), 60*time.Second)
	waitDrained(t, s, 10*time.Second)
	checkExactlyOnce(t, got, want)
	if st := s.Stats(); st.Refusal != "" || st.Delivered != uint64(len(want)) {
		t.Errorf("stats %+v", st)
	}
	if n := len(s.wal.Segments()); n > 2 {
		t.Errorf("%d segments left after delivering everything", n)
	}
}

// TestSink_QoS1_ResumesAfterQoS2Refused: a sink left with QoS 2 flows open
// by a broker that refuses QoS 2 (at 3.1.1: at MQTT 5 the CONNACK says so
// before any flow opens) is reopened at QoS 1, in MQTT 5: every message
// arrives, those of the abandoned flows possibly twice, with their ids.
func TestSink_QoS1_ResumesAfterQoS2Refused(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.Conf("max_qos 1"))
	c := startCollector(t, b.URL(), "up/#")
	dir := t.TempDir()
	opts := Options{Broker: b.URL(), ClientID: "walsink-" + t.Name(), ReconnectMin: 50 * time.Millisecond, ProtocolVersion: 4}
	s, err := Open(dir, opts, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	want := writeEpochs(t, s, 1, 3, 50)
	waitRefusal(t, s, ErrQoS2Refused.Error(), 10*time.Second)
	s.Close()
	opts.QoS, opts.ProtocolVersion = 1, 5
	s = mustOpen(t, dir, opts)
	waitDrained(t, s, 30*time.Second)
	got := c.waitFor(t, len(want), 10*time.Second)
	checkQoS1(t, got, want, 20)
}

// checkQoS1 checks the QoS 1 guarantee: every id of want arrives, nothing
// else; the first receipts come in want's order; at most maxRepeats
// receipts repeat an id already received.
func checkQoS1(t testing.TB, got, want []string, maxRepeats int) (repeats int) {
	t.Helper()
	seen := map[string]bool{}
	var firsts []string
	for _, id := range got {
		if seen[id] {
			repeats++
			continue
		}
		seen[id] = true
		firsts = append(firsts, id)
	}
	checkExactlyOnce(t, firsts, want)
	if repeats > maxRepeats {
		t.Errorf("%d repeats, want at most %d", repeats, maxRepeats)
	}
	return repeats
}

// TestSink_Immediate: an at-least-once sink publishes every Write at once,
// without waiting for a commit; PreCommit syncs, Commit does nothing; a
// reopened WAL publishes what it holds, whatever Recover is told.
func TestSink_Immediate(t *testing.T) {
	b := mosquitto.Start(t, mosquitto.DefaultInflight())
	c := startCollector(t, b.URL(), "up/#")
	dir := t.TempDir()
	opts := Options{Broker: b.URL(), ClientID: "walsink-" + t.Name(), Immediate: true}
	s := mustOpen(t, dir, opts)
	var want []string
	for e := uint64(1); e <= 3; e++ {
		for range 2 { // an epoch written twice, as the sink runner does
			m, base := msgs(e, 10), len(want)
			for i := range m {
				m[i].Payload = testPayload(nil, e, base+i)
				want = append(want, string(testID(nil, e, base+i)))
			}
			if err := s.Write(e, m); err != nil {
				t.Fatal(err)
			}
		}
		if e == 2 {
			if err := s.PreCommit(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkExactlyOnce(t, c.waitFor(t, len(want), 30*time.Second), want)
	// The collector has every message once the broker forwarded them; the
	// sink's PUBACKs may still be on the way back. Only what the sink saw
	// acknowledged leaves its backlog.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := s.WaitDelivered(ctx); err != nil {
		t.Fatalf("%d messages never acknowledged: %v", n, err)
	}
	s.Close()
	b.Stop()
	s = mustOpen(t, dir, opts)
	if err := s.Write(9, msgs(9, 5)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, dir, opts)
	if err := s.Recover(1); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.BacklogMessages != 5 {
		t.Errorf("backlog after reopening %d, want the 5 written while the broker was down", st.BacklogMessages)
	}
}
