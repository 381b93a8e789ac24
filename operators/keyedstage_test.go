package operators

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
	"github.com/eddy-edge/eddy/window"
	"github.com/eddy-edge/eddy/window/aggregate"
)

// TestKeyedStage_LateReadingsToSideOutput checks that a reading behind the
// watermark reaches the late side output in both orders: set aside by the
// keyed operator in event-time order, by the window in arrival order.
func TestKeyedStage_LateReadingsToSideOutput(t *testing.T) {
	for _, order := range []keyed.Order{keyed.EventTime, keyed.Arrival} {
		schema := event.NewSchema()
		calls := &expr.KeyedCalls{}
		e, _ := hclsyntax.ParseExpression([]byte(`count_key() > 0`), "t.hcl", hcl.InitialPos)
		filter, diags := expr.CompileWith(e, schema, expr.Options{Keyed: calls})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		be := state.NewMemory()
		store, err := window.NewStateStore(be, "window", []aggregate.Func{aggregate.Count})
		if err != nil {
			t.Fatal(err)
		}
		wop, err := window.NewOperator(window.Spec{Assigner: window.Tumbling(1000, 0, true),
			Aggs: []window.AggSpec{{Func: aggregate.Count, Arg: -1}}}, store)
		if err != nil {
			t.Fatal(err)
		}
		op, err := keyed.New(be, keyed.Options{Order: order, Calls: calls.Calls})
		if err != nil {
			t.Fatal(err)
		}
		task := NewWindowTask("p", "dev", []string{"n"}, wop)
		task.SetKeyed(NewKeyedStage(op, keyed.EvalSpec{Schema: schema, Decoder: decode.NewJSON(schema), Filter: filter, AggArgs: []*expr.Program{nil}}))
		b := stream.NewBatch(0)
		b.AppendWatermarked([]byte("k"), 1, 5000, nil, []byte(`{}`), 1, 0)
		b.AppendWatermarked([]byte("k"), 1, 100, nil, []byte(`{}`), 2, 4000) // its window [0, 1000) is past
		task.Process(b, true)
		task.AdvanceWatermark(4000)
		if d := task.TakeLate(); d.Len() != 1 || task.Late != 1 {
			t.Errorf("order %d: %d late readings kept, %d counted; want 1 and 1", order, d.Len(), task.Late)
		}
		task.AdvanceWatermark(1 << 62)
		if d := task.TakeResults(); d.Len() != 1 {
			t.Errorf("order %d: %d firings, want 1 (the window of the reading at 5000)", order, d.Len())
		}
	}
}
