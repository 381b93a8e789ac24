package stages

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/io/source"
	"github.com/eddy-edge/eddy/scripts/await"
)

// A pipeline whose input replays an ingest log (HoldProcessingTime) runs
// processing time on the replayed readings' arrivals until the source
// says it caught up: a window the readings' arrivals closed fires during
// the replay, the window of the last replayed reading waits, though the
// wall clock is far past its end, and fires on the first tick after
// CaughtUp.
func TestPipeline_ProcessingTimeHeldUntilCaughtUp(t *testing.T) {
	const src = `
agent {
  data_dir = "%DATA%"
  admin    = ""
}
source "mqtt" "sensors" {
  broker = "tcp://127.0.0.1:1"
  topics = ["sensors/+"]
}
sink "stdout" "out" {}
pipeline "p" {
  from = source.mqtt.sensors
  key  = event.device
  window "tumbling" {
    size = "1s"
    time = "processing"
  }
  aggregate { n = count() }
  to = [sink.stdout.out]
}
`
	cfg := loadTestConfig(t, src)
	p := newTestPipeline(t, cfg, src, 8<<20)
	p.HoldProcessingTime()
	out := make(chan SinkMsg, 64)
	p.Connect(Outputs{To: []Sink{{Name: "out", In: out, Done: func() {}}}})
	var wg sync.WaitGroup
	p.Start(&wg)

	// Arrivals 10 s and 8 s ago: the first two in one window, the third
	// in a later one.
	base := time.Now().Add(-10*time.Second).UnixMilli()/1000*1000 + 100
	msg := func(offset uint64, arrival int64) source.Message {
		return source.Message{Topic: "sensors/a", Payload: []byte(`{"device":"a"}`), Arrival: arrival, Offset: offset}
	}
	rb := &SourceBatch{Msgs: []source.Message{msg(1, base), msg(2, base+300), msg(3, base+2000)}}
	rb.Share(1)
	p.Input() <- rb

	var results []string
	read := func() {
		for {
			select {
			case m := <-out:
				if m.Delivery != nil {
					for _, it := range m.Delivery.Items() {
						results = append(results, string(it.Payload))
					}
				}
			default:
				return
			}
		}
	}
	has := func(start int64, n int) bool {
		for _, r := range results {
			if strings.Contains(r, fmt.Sprintf(`"window_start_ms":%d,`, start)) && strings.Contains(r, fmt.Sprintf(`"n":%d`, n)) {
				return true
			}
		}
		return false
	}
	first, last := base-100, base-100+2000
	await.True(t, 10*time.Second, "the window the replayed arrivals closed fired", func() bool { read(); return has(first, 2) })
	await.Never(t, 500*time.Millisecond, func() error { // five ticks of the wall clock
		if read(); has(last, 1) {
			return fmt.Errorf("the last replayed reading's window fired on the wall clock before the replay caught up: %q", results)
		}
		return nil
	})
	p.Input() <- &SourceBatch{CaughtUp: true}
	await.True(t, 10*time.Second, "the last window fired once caught up", func() bool { read(); return has(last, 1) })
	close(p.in)
	wg.Wait()
}
