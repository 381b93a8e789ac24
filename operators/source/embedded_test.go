package source

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/operators/broker"
)

func mustBroker(t testing.TB) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestEmbedded_InOrderPerPublisher(t *testing.T) {
	b := mustBroker(t)
	src := NewEmbedded(b, []string{"sensors/+/telemetry"}, testLogger(t))
	r := startSource(t, src)
	const per = 2000
	var last []paho.Token
	for _, qos := range []byte{0, 1, 2} {
		pub := mustPublisher(t, b.URL(), fmt.Sprintf("pub-%d", qos))
		for i := range per {
			payload := fmt.Sprintf("%d:%d", qos, i)
			last = append(last, pub.Publish(fmt.Sprintf("sensors/q%d/telemetry", qos), qos, false, payload))
		}
		pub.Publish("sensors/q0/status", 1, false, "not matching")
	}
	got := r.receive(t, 3*per, 30*time.Second)
	for _, tok := range last {
		tok.Wait()
	}
	next := map[string]int{}
	for i, m := range got {
		q, seq, _ := strings.Cut(string(m.Payload), ":")
		n, _ := strconv.Atoi(seq)
		if n != next[q] {
			t.Fatalf("publisher %s: got %d, want %d", q, n, next[q])
		}
		next[q]++
		if m.Offset != uint64(i+1) || m.ack != nil || m.Arrival == 0 || m.Topic != "sensors/q"+q+"/telemetry" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	if st := src.(StatsReporter).Stats(); st.Received != 3*per || st.Dropped != 0 || !st.Connected {
		t.Fatalf("stats %+v", st)
	}
}

// TestEmbedded_Backpressure fills the queue before Run starts: the hook
// holds the sensor, then rejects it unacknowledged; the sensor re-sends
// after reconnecting, and once Run drains the queue every message arrives.
func TestEmbedded_Backpressure(t *testing.T) {
	b := mustBroker(t)
	src := NewEmbedded(b, []string{"t"}, testLogger(t)).(*Embedded)
	src.maxPending, src.maxWait = 5, 50*time.Millisecond
	pub := mustPublisher(t, b.URL(), "pub-bp")
	for i := range 20 {
		pub.Publish("t", 1, false, strconv.Itoa(i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for src.Stats().Dropped == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no publish rejected with a full queue: %+v", src.Stats())
		}
		time.Sleep(5 * time.Millisecond) // the publisher works over the network
	}
	if st := src.Stats(); st.Pending != 5 || b.Rejected() == 0 {
		t.Fatalf("stats %+v, broker rejected %d: want a full queue of 5 and rejections", st, b.Rejected())
	}
	r := startSource(t, src)
	// Every message arrives; the re-sent ones in order after the first 5.
	seen := map[int]bool{}
	for len(seen) < 20 {
		for _, n := range seqs(t, r.receive(t, 1, 30*time.Second)) {
			seen[n] = true
		}
	}
}

// TestSimulator_IntoEmbedded runs the simulator against the embedded broker
// and checks the mix of readings against the generator for the same seed.
func TestSimulator_IntoEmbedded(t *testing.T) {
	b := mustBroker(t)
	r := startSource(t, NewEmbedded(b, []string{"sensors/+/telemetry"}, testLogger(t)))
	opts := SimulatorOptions{Broker: b.URL(), Devices: 4, Rate: 1e6, Seed: 3,
		OutOfOrder: 0.1, Late: 0.05, Malformed: 0.05, MaxReadings: 3000, QoS: 1}
	sim := NewSimulator(opts, testLogger(t))
	if err := sim.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sim.Published() != 3000 {
		t.Fatalf("published %d, want 3000", sim.Published())
	}
	got := r.receive(t, 3000, 30*time.Second)

	opts.Topic = DefaultSimulatorTopic
	want := newReadingGenerator(opts)
	wantCounts, gotCounts := map[readingKind]int{}, map[readingKind]int{}
	devices := map[string]int{}
	for _, m := range got {
		_, _, kind := want.reading(0)
		if kind == readingOutOfOrder {
			kind = readingOnTime // a consumer cannot tell them apart reliably
		}
		wantCounts[kind]++
		k := classify(t, m.Payload, m.Arrival)
		if k == readingOutOfOrder {
			k = readingOnTime
		}
		gotCounts[k]++
		devices[m.Topic]++
	}
	if fmt.Sprint(gotCounts) != fmt.Sprint(wantCounts) {
		t.Fatalf("kinds %v, want %v for seed 3", gotCounts, wantCounts)
	}
	if len(devices) != 4 || devices["sensors/sensor-4/telemetry"] != 750 {
		t.Fatalf("topics %v, want 4 devices with 750 readings each", devices)
	}
	if wantCounts[readingMalformed] < 100 || wantCounts[readingLate] < 100 {
		t.Fatalf("mix %v: too few malformed or late readings to mean anything", wantCounts)
	}
}
