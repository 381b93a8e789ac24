package operators

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
)

// BenchmarkKeyed_AlarmControl measures the keyed subtask of `alarm "hot"
// { raise = event.temp > LIMIT }` in event-time order over 1,000 keys,
// state in bbolt, batches of 512 with the watermark 100 ms behind, with
// LIMIT a constant (nothing captured) and control.limit (the prepare
// stage's vector carried through the buffer and decoded per reading; the
// control state changes every 10,000 readings, the limit stays 22 so both
// raise the same alarms). Report: readings/cpu-s.
func BenchmarkKeyed_AlarmControl(b *testing.B) {
	for _, limit := range []string{"22", "control.limit"} {
		b.Run("limit="+limit, func(b *testing.B) {
			schema := event.NewSchema()
			st := control.New()
			var paths expr.ControlPaths
			opts := expr.Options{}
			if limit != "22" {
				opts.ControlCapture = &paths
			}
			e, _ := hclsyntax.ParseExpression([]byte("event.temp > "+limit), "bench.hcl", hcl.InitialPos)
			raise, diags := expr.CompileWith(e, schema, opts)
			if diags.HasErrors() {
				b.Fatal(diags)
			}
			be, err := state.OpenBolt(filepath.Join(b.TempDir(), "state.db"), state.BoltOptions{CacheBytes: 32 << 20})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { be.Close() })
			captures := paths.Len() > 0
			op, err := keyed.New(be, keyed.Options{Order: keyed.EventTime, CacheBytes: 32 << 20, Control: captures})
			if err != nil {
				b.Fatal(err)
			}
			spec := keyed.EvalSpec{Schema: schema, Decoder: decode.NewJSON(schema)}
			if captures {
				spec.Control = &paths
			}
			task := NewWindowTask("bench", "dev", nil, nil)
			stage := NewKeyedStage(op, spec)
			task.SetKeyed(stage)
			if err := stage.SetAlarm(AlarmSpec{Name: "hot", Raise: raise}); err != nil {
				b.Fatal(err)
			}
			const keys = 1000
			var payloads, keyBytes [][]byte
			var kgs []uint16
			for i := range keys {
				k := fmt.Appendf(nil, "sensor-%06d", i)
				keyBytes = append(keyBytes, k)
				kgs = append(kgs, state.KeyGroup(k, state.DefaultMaxKeyGroups))
				payloads = append(payloads, fmt.Appendf(nil, `{"device":"sensor-%06d","ts":1700000000000,"temp":%d}`, i, 20+i%5))
			}
			var vec []byte
			batch := stream.NewBatch(0)
			maxT := int64(0)
			run := func(i int) {
				if captures && i%10_000 == 0 {
					if err := st.Apply(fmt.Appendf(nil, `{"limit":22,"rev":%d}`, i)); err != nil {
						b.Fatal(err)
					}
					vec = paths.AppendCapture(vec[:0], st)
				}
				t := 1_700_000_000_000 + int64(i) + int64(i*7919%50)
				maxT = max(maxT, t)
				batch.Append(keyBytes[i%keys], kgs[i%keys], t, nil, payloads[i%keys], uint64(i))
				if captures {
					batch.AppendControl(vec)
				}
				if batch.Len() < 512 {
					return
				}
				task.Process(batch, false)
				batch.Release()
				batch = stream.NewBatch(0)
				task.AdvanceWatermark(maxT - 100)
				task.TakeResults()
				if err := stage.Err(); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 3 * keys {
				run(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for i := 0; i < b.N; i++ {
				run(3*keys + i)
			}
			b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "readings/cpu-s")
		})
	}
}
