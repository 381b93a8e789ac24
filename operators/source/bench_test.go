package source

import (
	"testing"
)

// BenchmarkEmbedded_Receive measures the broker-hook path of the embedded
// source: copy into the queue, then batch out.
func BenchmarkEmbedded_Receive(b *testing.B) {
	e := &Embedded{q: newPending(), maxPending: embeddedMaxPending, maxWait: embeddedMaxWait}
	payload := []byte(`{"device":"sensor-3","ts":1700000000000,"temp":21.53,"humidity":40.1}`)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := e.receive("sensors/sensor-3/telemetry", payload); err != nil {
			b.Fatal(err)
		}
		if i++; i%MaxBatch == 0 {
			e.q.take(MaxBatch)
		}
	}
}

// BenchmarkPending_Push measures the MQTT handler's path (paho has already
// allocated the message).
func BenchmarkPending_Push(b *testing.B) {
	p := newPending()
	m := Message{Topic: "t", Payload: []byte("x")}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.push(m, 0)
		if i++; i%MaxBatch == 0 {
			p.take(MaxBatch)
		}
	}
}

func TestEmbedded_ReceiveAllocs(t *testing.T) {
	e := &Embedded{q: newPending(), maxPending: embeddedMaxPending, maxWait: embeddedMaxWait}
	payload := []byte(`{"device":"sensor-3","ts":1700000000000,"temp":21.53,"humidity":40.1}`)
	for range 2 * MaxBatch { // warm the queue's backing array
		e.receive("t", payload)
	}
	e.q.take(2 * MaxBatch)
	n := 0
	allocs := testing.AllocsPerRun(MaxBatch*4, func() {
		e.receive("t", payload)
		if n++; n%MaxBatch == 0 {
			e.q.take(MaxBatch)
		}
	})
	// One batch slice per MaxBatch messages and one arena block per 64 KiB.
	if allocs > 0.05 {
		t.Fatalf("embedded receive: %v allocs per message", allocs)
	}
}
