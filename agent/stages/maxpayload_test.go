package stages

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/operators"
	"github.com/eddy-edge/eddy/operators/record"
)

// TestPipeline_SendResultsMaxPayload: a sink with max_payload gets only the
// results that fit, in order; a sink without gets them all; each result
// over a sink's limit is counted and dead-lettered, whole, with reason
// too_large, once per sink refusing it.
func TestPipeline_SendResultsMaxPayload(t *testing.T) {
	small, mid, big := strings.Repeat("s", 10), strings.Repeat("m", 100), strings.Repeat("b", 1000)
	for _, tt := range []struct {
		name      string
		limits    []int   // max_payload of each sink in to; 0 = none
		packet    []int64 // the Maximum Packet Size its MQTT 5 broker announced (the PUBLISH taken as the payload + 10); 0 = none
		deadSink  bool
		payloads  []string
		want      [][]string // what each sink gets
		wantDead  []string   // dead letters' sinks, in order
		wantCount uint64
	}{
		{name: "no limit", limits: []int{0}, deadSink: true, payloads: []string{small, big},
			want: [][]string{{small, big}}},
		{name: "all fit", limits: []int{1000}, deadSink: true, payloads: []string{small, big},
			want: [][]string{{small, big}}},
		{name: "one over", limits: []int{500}, deadSink: true, payloads: []string{small, big, mid},
			want: [][]string{{small, mid}}, wantDead: []string{"s0"}, wantCount: 1},
		{name: "all over: nothing sent", limits: []int{5}, deadSink: true, payloads: []string{small, big},
			want: [][]string{nil}, wantDead: []string{"s0", "s0"}, wantCount: 2},
		{name: "per sink", limits: []int{0, 500, 50}, deadSink: true, payloads: []string{small, mid, big},
			want: [][]string{{small, mid, big}, {small, mid}, {small}}, wantDead: []string{"s1", "s2", "s2"}, wantCount: 3},
		{name: "no dead_letter sink: counted only", limits: []int{500}, payloads: []string{big, small},
			want: [][]string{{small}}, wantCount: 1},
		{name: "broker's packet size", limits: []int{0}, packet: []int64{500}, deadSink: true, payloads: []string{small, big, mid},
			want: [][]string{{small, mid}}, wantDead: []string{"s0"}, wantCount: 1},
		{name: "packet size and max_payload", limits: []int{0, 500}, packet: []int64{50, 0}, deadSink: true, payloads: []string{small, mid, big},
			want: [][]string{{small}, {small, mid}}, wantDead: []string{"s0", "s0", "s1"}, wantCount: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := metrics.NewSet()
			p := &Pipeline{name: "p", m: NewMetrics(set, "p"), log: slog.New(slog.DiscardHandler), clk: testClock{}}
			var ins []chan SinkMsg
			for i, lim := range tt.limits {
				in := make(chan SinkMsg, 64)
				ins = append(ins, in)
				s := Sink{Name: "s" + string(rune('0'+i)), In: in, MaxPayload: lim}
				if i < len(tt.packet) && tt.packet[i] > 0 {
					limit := tt.packet[i]
					s.PacketLimit = func(it record.Item) (int64, int64, bool) {
						size := int64(len(it.Payload)) + 10
						return size, limit, size > limit
					}
				}
				p.to = append(p.to, s)
			}
			var deadIn chan SinkMsg
			if tt.deadSink {
				deadIn = make(chan SinkMsg, 64)
				p.deadLetter = &Sink{Name: "dead", In: deadIn}
			}
			d := new(operators.Delivery)
			for _, pl := range tt.payloads {
				d.AddEncoded([]byte(pl), &record.Result{Key: []byte("k"), Names: []string{"n"}, Values: []float64{1}})
			}
			p.sendResults(7, d)

			for i, in := range ins {
				var got []string
				if len(in) > 0 {
					m := <-in
					if m.Epoch != 7 {
						t.Errorf("sink %d: epoch %d, want 7", i, m.Epoch)
					}
					for _, it := range m.Delivery.Items() {
						if it.Result == nil || string(it.Result.Key) != "k" {
							t.Errorf("sink %d: item %q lost its result", i, it.Payload)
						}
						got = append(got, string(it.Payload))
					}
				}
				if strings.Join(got, ",") != strings.Join(tt.want[i], ",") || len(in) != 0 {
					t.Errorf("sink %d got %d items %.40q, want %d", i, len(got), got, len(tt.want[i]))
				}
			}
			var dead []string
			if len(deadIn) > 0 {
				m := <-deadIn
				for _, it := range m.Delivery.Items() {
					var dl struct{ Reason, Detail, Payload string }
					if err := json.Unmarshal(it.Payload, &dl); err != nil {
						t.Fatal(err)
					}
					if dl.Reason != "too_large" || len(dl.Payload) <= 5 || !strings.Contains(dl.Detail, "max_payload") &&
						!strings.Contains(dl.Detail, "Maximum Packet Size") {
						t.Errorf("dead letter %.200s", it.Payload)
					}
					_, sinkName, _ := strings.Cut(dl.Detail, "of sink ")
					sinkName = strings.TrimSuffix(sinkName, " announces")
					dead = append(dead, strings.Trim(sinkName, `"`))
				}
			}
			if strings.Join(dead, ",") != strings.Join(tt.wantDead, ",") {
				t.Errorf("dead letters for sinks %v, want %v", dead, tt.wantDead)
			}
			if got := p.m.DeadLetteredByReason()["too_large"]; got != tt.wantCount {
				t.Errorf("counted %d too_large, want %d", got, tt.wantCount)
			}
		})
	}
}
