package keyed

import (
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

// TestFuncState_SetStrings sets string (and other) values on two calls in
// turn and checks each call returns the value set last, and the arena's
// growth: a repeated string, or one replacing the arena's last, adds
// nothing to it.
func TestFuncState_SetStrings(t *testing.T) {
	str := func(s string) event.Value { return event.StringValue([]byte(s)) }
	steps := []struct {
		call  int
		v     event.Value
		arena int // the arena's length after the step
	}{
		{0, str("on"), 2},
		{0, str("on"), 2},            // same: kept
		{0, str("off"), 3},           // the arena's last string: overwritten
		{1, str("idle"), 7},          // a second call's string after it
		{0, str("on"), 9},            // not last: appended (compact reclaims)
		{1, str("idle"), 9},          // same: kept
		{1, event.NumberValue(4), 9}, // a number: the string is dead
		{0, str("standby"), 14},      // the arena's last string again: overwritten
		{0, event.Value{Kind: event.Missing}, 14},
		{0, str("on"), 16},
	}
	var s funcState
	s.reset(2)
	want := make([]event.Value, 2)
	for i, st := range steps {
		s.set(&s.calls[st.call], st.v)
		want[st.call] = st.v
		if st.v.Kind == event.Missing {
			want[st.call] = event.Value{Kind: event.Null}
		}
		for c := range want {
			if want[c].Kind == 0 {
				continue
			}
			if got := s.val(&s.calls[c]); !s.calls[c].seen || !sameValue(got, want[c]) || got.Kind != want[c].Kind {
				t.Fatalf("step %d: call %d holds %v %q, want %v %q", i, c, got.Kind, got.Str, want[c].Kind, want[c].Str)
			}
		}
		if len(s.arena) != st.arena {
			t.Fatalf("step %d: arena %q, want %d bytes", i, s.arena, st.arena)
		}
	}
}
