package operators

import (
	"math"
	"testing"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/expr"
)

func TestPreparer_Prepare(t *testing.T) {
	schema := event.NewSchema()
	spec := PrepareSpec{Schema: schema, MaxFutureSkewMs: 60_000, Parallelism: 4}
	spec.Filter = mustCompile(t, `event.temp == null || event.temp < 200`, schema)
	spec.Maps = []MapField{{Slot: schema.Slot(event.Path{"temp_f"}), Prog: mustCompile(t, `event.temp * 9 / 5 + 32`, schema)}}
	spec.Key = mustCompile(t, `event.device`, schema)
	// Two aggregates of one field share its program (evaluated once).
	tempF := mustCompile(t, `event.temp_f`, schema)
	spec.AggArgs = []*expr.Program{nil, tempF, tempF}
	ts, err := decode.NewTimestamp(schema.Slot(event.Path{"ts"}), "ms", "")
	if err != nil {
		t.Fatal(err)
	}
	spec.Timestamp = ts
	spec.Decoder = decode.NewJSON(schema)
	p := NewPreparer(spec)

	const now = 1_700_000_000_000
	cases := []struct {
		name    string
		payload string
		want    Outcome
		reason  string
		key     string
		value   float64 // the second aggregate argument; NaN = null
		// unsynced: the device clock is not synchronised (max_future_skew
		// does not apply)
		unsynced bool
	}{
		{"pass", `{"device":"a","ts":1700000000000,"temp":100}`, Pass, "", "a", 212, false},
		{"null value skipped by aggregates", `{"device":"a","ts":1700000000000}`, Pass, "", "a", math.NaN(), false},
		{"numeric key", `{"device":17,"ts":1700000000000,"temp":0}`, Pass, "", "17", 32, false},
		{"filtered", `{"device":"a","ts":1700000000000,"temp":250}`, Filtered, "", "", 0, false},
		{"malformed json", `{"device":`, Rejected, "malformed_json", "", 0, false},
		{"missing timestamp", `{"device":"a","temp":1}`, Rejected, "missing_timestamp", "", 0, false},
		{"bad timestamp", `{"device":"a","ts":"yesterday","temp":1}`, Rejected, "bad_timestamp", "", 0, false},
		{"future timestamp", `{"device":"a","ts":1700000060001,"temp":1}`, Rejected, ReasonFutureTimestamp, "", 0, false},
		{"future timestamp, clock not synchronised", `{"device":"a","ts":1700000060001,"temp":0}`, Pass, "", "a", 32, true},
		{"missing key", `{"ts":1700000000000,"temp":1}`, Rejected, ReasonMissingKey, "", 0, false},
		{"wrong type", `{"device":"a","ts":1700000000000,"temp":"hot"}`, Rejected, "", "", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := p.Prepare([]byte(c.payload), "topic", 1, 0, now, !c.unsynced)
			if got != c.want {
				t.Fatalf("outcome %d, want %d (reject %+v)", got, c.want, p.Reject)
			}
			switch got {
			case Rejected:
				if c.reason != "" && p.Reject.Reason != c.reason {
					t.Fatalf("reason %q, want %q", p.Reject.Reason, c.reason)
				}
				if p.Reject.Reason == "" {
					t.Fatal("rejected without a reason")
				}
			case Pass:
				if string(p.Key) != c.key {
					t.Fatalf("key %q, want %q", p.Key, c.key)
				}
				for i := 1; i <= 2; i++ {
					if v := p.Values[i]; !(v == c.value || math.IsNaN(v) && math.IsNaN(c.value)) {
						t.Fatalf("value %d: %v, want %v", i, v, c.value)
					}
				}
				want := int64(1_700_000_000_000)
				if c.unsynced {
					want = 1_700_000_060_001
				}
				if p.Time != want {
					t.Fatalf("time %d", p.Time)
				}
				if p.Subtask < 0 || p.Subtask >= 4 {
					t.Fatalf("subtask %d out of range", p.Subtask)
				}
			}
		})
	}
}
