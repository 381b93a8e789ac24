package source

import (
	"testing"
)

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
