package record

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

// TestAppendReadingJSON pins the record of one reading: the id, the
// fields in order, and each kind of value.
func TestAppendReadingJSON(t *testing.T) {
	r := &Result{Pipeline: "doors", Key: []byte("dev\"1"), Start: 1700000003000, Seq: 42}
	got := string(AppendReadingJSON(nil, "pi-7", r, []string{"n", "s", "b", "null", "nan"},
		[]event.Value{event.NumberValue(2.5), event.StringValue([]byte("open")), event.BoolValue(true), {Kind: event.Null}, event.NumberValue(math.NaN())}))
	want := `{"id":"pi-7/doors/dev\"1/1700000003000/42","pipeline":"doors","key":"dev\"1","time":"2023-11-14T22:13:23.000Z","time_ms":1700000003000,"kind":"reading","n":2.5,"s":"open","b":true,"null":null,"nan":null}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("not valid JSON")
	}
}
