package source

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/eddy-edge/eddy/scripts/mosquitto"
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

// BenchmarkMQTT_Mosquitto measures the ingest rate from mosquitto at MQTT 5
// against 3.1.1: b.N QoS 1 readings of 100 bytes wait in the source's
// session, then the source drains them, acking each batch as it arrives
// (the agent acks after its ingest commit). Run with -benchtime Nx.
func BenchmarkMQTT_Mosquitto(b *testing.B) {
	payload := `{"device":"sensor-1","ts":1700000000000,"temp":21.5,"humidity":40.1,"seq":` + strings.Repeat("0", 24) + `}`
	for _, v := range []struct {
		name    string
		version byte
	}{{"mqtt311", 4}, {"mqtt5", 5}} {
		b.Run(v.name, func(b *testing.B) {
			broker := mosquitto.Start(b)
			opts := MQTTOptions{Broker: broker.URL(), ClientID: "bench-" + v.name, Topics: []string{"sensors/#"}, QoS: 1, ProtocolVersion: v.version}
			src := NewMQTT(opts, nil)
			r := startSource(b, src)
			waitConnected(b, src)
			r.stop(b)
			pub := mustPublisher(b, broker.URL(), "bench-pub")
			var last paho.Token
			for range b.N {
				last = pub.Publish("sensors/s1/telemetry", 1, false, payload)
			}
			if !last.WaitTimeout(5*time.Minute) || last.Error() != nil {
				b.Fatalf("publish: %v", last.Error())
			}
			b.ResetTimer()
			src = NewMQTT(opts, nil)
			r = startSource(b, src)
			for got := 0; got < b.N; {
				batch := r.receive(b, 1, time.Minute)
				AckAll(batch)
				got += len(batch)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
