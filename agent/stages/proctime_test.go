package stages

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// wallClock is a Clock whose wall time the test sets.
type wallClock struct{ wall atomic.Int64 }

func (c *wallClock) MonoMs() int64    { return time.Now().UnixMilli() }
func (c *wallClock) WallMs() int64    { return c.wall.Load() }
func (c *wallClock) WallSynced() bool { return true }

// The old definition of a rollover on processing time keeps its last
// window, which ends at the cut, open while the wall clock is less than
// cutGrace past the cut and no reading that arrived that late has come
// through: a reading stamped before the cut that reaches it after one
// stamped at the cut still counts in it. Then the window fires, once, and
// the old definition retires (Options.Retired); a reading stamped before
// the cut read after that is counted, in no window; no window of it
// starts at or after the cut.
func TestPipeline_ProcessingTimeOldDefinitionWaitsForTheCut(t *testing.T) {
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
	const cut = 1_700_000_010_000
	for _, c := range []struct {
		name string
		// release is what lets the last window fire: the wall clock a
		// second past the cut, or a reading that arrived then.
		release func(clk *wallClock, send func(offset uint64, arrival int64))
	}{
		{"by the wall clock", func(clk *wallClock, _ func(uint64, int64)) { clk.wall.Store(cut + 1_000) }},
		{"by a reading a second past the cut", func(_ *wallClock, send func(uint64, int64)) { send(5, cut+1_000) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := loadTestConfig(t, src)
			p := newTestPipeline(t, cfg, src, 8<<20)
			clk := &wallClock{}
			clk.wall.Store(cut - 500)
			p.clk = clk
			p.SetRollover(RolloverRole{Old: true, Fresh: true, Roll: &Rollover{Pipeline: "p", Old: "p--old-abcd", OldHash: "abcd",
				Cut: cut, RetireAt: cut - 1, ProcessingTime: true}})
			out := make(chan SinkMsg, 64)
			p.Connect(Outputs{To: []Sink{{Name: "out", In: out, Done: func() {}}}})
			var wg sync.WaitGroup
			p.Start(&wg)
			send := func(offset uint64, arrival int64) {
				rb := &SourceBatch{Msgs: []source.Message{{Topic: "sensors/a", Payload: []byte(`{"device":"a"}`), Arrival: arrival, Offset: offset}}}
				rb.Share(1)
				p.Input() <- rb
			}
			var results []string
			read := func() []string {
				for {
					select {
					case m := <-out:
						if m.Delivery != nil {
							for _, it := range m.Delivery.Items() {
								results = append(results, string(it.Payload))
							}
						}
					default:
						return results
					}
				}
			}

			send(1, cut-600)
			clk.wall.Store(cut + 300)                           // past the cut, within the grace
			send(2, cut+200)                                    // the new definition's: it holds nothing back
			await.Never(t, 500*time.Millisecond, func() error { // five ticks
				if r := read(); len(r) > 0 {
					return fmt.Errorf("the old definition's last window fired within the grace: %q", r)
				}
				return nil
			})
			send(3, cut-1) // stamped before the cut, come through after one stamped at it
			await.True(t, 10*time.Second, "the third reading read", func() bool { return p.m.in.Get() == 3 })
			c.release(clk, send)
			await.True(t, 10*time.Second, "the last window fired", func() bool { return len(read()) > 0 })
			filtered := p.m.filtered.Get()
			// Stamped before the cut, read after its last window fired: the
			// retired old definition counts it as filtered, not as late.
			send(9, cut-2)
			await.True(t, 10*time.Second, "the reading too late for the last window counted", func() bool { return p.m.filtered.Get() == filtered+1 })
			await.Never(t, 300*time.Millisecond, func() error {
				if r := read(); len(r) != 1 {
					return fmt.Errorf("results %q, want the last window's alone", r)
				}
				return nil
			})
			want := fmt.Sprintf(`"window_start_ms":%d,"window_end_ms":%d,`, cut-1_000, cut)
			if r := results[0]; !strings.Contains(r, want) || !strings.Contains(r, `"n":2`) {
				t.Fatalf("the last window is %s, want [%d, %d) with n=2: the readings stamped before the cut", r, cut-1_000, cut)
			}
			close(p.in)
			wg.Wait()
		})
	}
}
