package operators

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
	"github.com/eddy-edge/eddy/operators/keyed"
	"github.com/eddy-edge/eddy/operators/stream"
	"github.com/eddy-edge/eddy/state"
)

// TestKeyedStage_ChainedBlocks runs one stage with dedup, absence,
// report_by_exception and alarm "hot", set in that order, on readings of
// one key: dedup drops the repeat before any block sees it; a reading
// whose alarm condition is not a boolean is dead-lettered before any block
// sees it (report_by_exception would have reported it); every other
// reading goes through every block, and a reading's records come in the
// blocks' order (absence's resumed before the alarm's cleared). Records
// hand-derived from each block's rules.
func TestKeyedStage_ChainedBlocks(t *testing.T) {
	task := blockTask(t, 0, []string{"event.id", "event.v", "event.t > 80", "event.t < 70"}, func(k *KeyedStage, progs []*expr.Program) error {
		if err := k.SetDedup(progs[0], keyed.Dedup{WithinMs: 10_000, Time: keyed.EventTimeDomain}); err != nil {
			return err
		}
		if err := k.SetAbsence(AbsenceSpec{Block: keyed.Absence{TimeoutMs: 5000, Time: keyed.EventTimeDomain}}); err != nil {
			return err
		}
		if err := k.SetReport(ReportSpec{Value: progs[1], Block: keyed.ReportByException{Deadband: 1, Time: keyed.EventTimeDomain}}); err != nil {
			return err
		}
		return k.SetAlarm(AlarmSpec{Name: "hot", Raise: progs[2], Clear: progs[3]})
	})
	b := stream.NewBatch(0)
	for i, r := range []struct {
		ts      int64
		payload string
	}{
		{1000, `{"id":1,"v":20,"t":85,"s":"a"}`},   // absence starts; reported; raised at once
		{2000, `{"id":1,"v":30,"t":60,"s":"b"}`},   // id 1 again within 10 s: dropped (it would clear and report)
		{3000, `{"id":2,"v":50,"t":"x","s":"c"}`},  // the raise condition fails: dead-lettered
		{8000, `{"id":3,"v":20.5,"t":65,"s":"d"}`}, // the deadline 6000 fired first: resumed; within the deadband; cleared
	} {
		b.AppendWatermarked([]byte("a"), 1, r.ts, nil, []byte(r.payload), uint64(i+1), 0)
	}
	got := runToEnd(t, task, b)
	want := []string{
		reportRec("a", 1000, 0, "20", "a"),
		raisedRec("a", 1000, 0, 1000, "a"),
		silentRec(6000, 0, 1000),
		resumedRec(8000, 1, 1000, "d"),
		clearedRec("a", 8000, 1, 1000, "d"),
		silentRec(13000, 2, 8000), // the end of the input
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	k := task.Keyed()
	if d := task.TakeDead(); d == nil || d.Len() != 1 || k.Rejected[keyed.ReasonWrongType] != 1 || k.Duplicates != 1 {
		t.Errorf("dead letters %v, wrong_type %d, duplicates %d: want one of each", d, k.Rejected[keyed.ReasonWrongType], k.Duplicates)
	}
}

// TestKeyedStage_ChainRefusesRepeats refuses a second block whose records
// would share the first one's ids or state.
func TestKeyedStage_ChainRefusesRepeats(t *testing.T) {
	for name, set := range map[string]func(k *KeyedStage, p *expr.Program) error{
		"report_by_exception": func(k *KeyedStage, p *expr.Program) error {
			return k.SetReport(ReportSpec{Value: p, Block: keyed.ReportByException{Time: keyed.EventTimeDomain}})
		},
		"alarm": func(k *KeyedStage, p *expr.Program) error { return k.SetAlarm(AlarmSpec{Name: "hot", Raise: p}) },
		"absence": func(k *KeyedStage, _ *expr.Program) error {
			return k.SetAbsence(AbsenceSpec{Block: keyed.Absence{TimeoutMs: 1, Time: keyed.EventTimeDomain}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			var second error
			blockTask(t, 0, []string{"event.v > 1"}, func(k *KeyedStage, progs []*expr.Program) error {
				if err := set(k, progs[0]); err != nil {
					return err
				}
				second = set(k, progs[0])
				return nil
			})
			if second == nil {
				t.Errorf("a second %s was taken", name)
			}
		})
	}
}

// TestKeyedStage_ChainedBlocksNoAllocs checks that chaining blocks adds
// no allocation per reading: report_by_exception and two alarms on bbolt
// state, in arrival order, once warm (readings that move nothing, so no
// record is made).
func TestKeyedStage_ChainedBlocksNoAllocs(t *testing.T) {
	schema := event.NewSchema()
	compile := func(src string) *expr.Program {
		e, _ := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		p, diags := expr.CompileWith(e, schema, expr.Options{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return p
	}
	value, hot, cold := compile("event.v"), compile("event.v > 80"), compile("event.v < 0")
	be, err := state.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.BoltOptions{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	op, err := keyed.New(be, keyed.Options{Order: keyed.Arrival})
	if err != nil {
		t.Fatal(err)
	}
	task := NewWindowTask("t", "dev", nil, nil)
	stage := NewKeyedStage(op, keyed.EvalSpec{Schema: schema, Decoder: decode.NewJSON(schema)})
	task.SetKeyed(stage)
	for _, err := range []error{
		stage.SetReport(ReportSpec{Value: value, Block: keyed.ReportByException{Deadband: 100, Time: keyed.EventTimeDomain}}),
		stage.SetAlarm(AlarmSpec{Name: "hot", Raise: hot}),
		stage.SetAlarm(AlarmSpec{Name: "cold", Raise: cold}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	batch := stream.NewBatch(0)
	for i := range 64 {
		batch.Append(strconv.AppendInt(nil, int64(i), 10), uint16(i), int64(i), nil, []byte(`{"v":20}`), uint64(i))
	}
	task.Process(batch, false)
	task.TakeResults()
	allocs := testing.AllocsPerRun(100, func() { task.Process(batch, false) })
	if per := allocs / 64; per > 0 {
		t.Fatalf("%.2f allocations per reading, want 0", per)
	}
	if err := stage.Err(); err != nil {
		t.Fatal(err)
	}
}
