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
		{0, str("on"), 16},                      // the inline arena full
		{1, str("a long idle state"), 33},       // past it: moved out
		{1, str("a long idle state"), 33},       // same: kept
		{0, str("standby and waiting"), 52},     // not last: appended
		{1, event.NumberValue(1), 52},           // a number: the string is dead
		{0, str("standby and waiting, ok"), 56}, // the last string: overwritten
	}
	var s funcState
	s.reset(2)
	want := make([]event.Value, 2)
	for i, st := range steps {
		s.set(s.call(st.call), st.v)
		want[st.call] = st.v
		if st.v.Kind == event.Missing {
			want[st.call] = event.Value{Kind: event.Null}
		}
		for c := range want {
			if want[c].Kind == 0 {
				continue
			}
			if got := s.val(s.call(c)); !s.call(c).seen || !sameValue(got, want[c]) || got.Kind != want[c].Kind {
				t.Fatalf("step %d: call %d holds %v %q, want %v %q", i, c, got.Kind, got.Str, want[c].Kind, want[c].Str)
			}
		}
		if len(s.arena()) != st.arena {
			t.Fatalf("step %d: arena %q, want %d bytes", i, s.arena(), st.arena)
		}
	}
}

// TestFuncState_CompactAndCodec checks that compact keeps every call's
// value while the arena shrinks to the live strings (back inline when they
// fit), and that a state encoded and decoded, then loaded over a state
// that held others, has the same calls.
func TestFuncState_CompactAndCodec(t *testing.T) {
	str := func(s string) event.Value { return event.StringValue([]byte(s)) }
	tests := []struct {
		name  string
		vals  []event.Value // set in turn on calls 0, 1, ...; Kind 0: never set
		arena int           // the arena's length after compact
	}{
		{"short string", []event.Value{str("on")}, 2},
		{"long string", []event.Value{str("a state longer than the inline arena")}, 36},
		{"two calls, back inline", []event.Value{str("idle"), str("on")}, 6},
		{"three calls, mixed", []event.Value{event.NumberValue(21.5), {}, str("a state longer than the inline arena")}, 36},
		{"bool and null", []event.Value{event.BoolValue(true), {Kind: event.Null}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := len(tt.vals)
			var s funcState
			s.reset(n)
			// Strings set and replaced first, so the arena holds dead bytes.
			for i := range n {
				s.set(s.call(i), str("a dead value, long enough to move the arena out"))
			}
			for i, v := range tt.vals {
				if v.Kind != 0 {
					s.set(s.call(i), v)
					s.call(i).at, s.call(i).count = int64(100+i), int64(i)
				} else {
					*s.call(i) = callState{}
				}
			}
			s.compact(nil)
			if len(s.arena()) != tt.arena {
				t.Fatalf("arena %q after compact, want %d bytes", s.arena(), tt.arena)
			}
			check := func(what string, got *funcState) {
				t.Helper()
				for i, v := range tt.vals {
					c := got.call(i)
					if c.seen != (v.Kind != 0) {
						t.Fatalf("%s: call %d seen %v, want %v", what, i, c.seen, v.Kind != 0)
					}
					if !c.seen {
						continue
					}
					if g := got.val(c); !sameValue(g, v) || g.Kind != v.Kind || c.at != int64(100+i) || c.count != int64(i) {
						t.Fatalf("%s: call %d holds %v %q at %d count %d, want %v %q", what, i, g.Kind, g.Str, c.at, c.count, v.Kind, v.Str)
					}
				}
			}
			check("compacted", &s)
			dec := &funcState{}
			dec.reset(n)
			decoded, err := funcCodec{st: dec}.Decode(funcCodec{}.Append(nil, s))
			if err != nil {
				t.Fatal(err)
			}
			var loaded funcState
			loaded.reset(n)
			for i := range n {
				loaded.set(loaded.call(i), str("another key's value, long enough to be out"))
			}
			loaded.load(decoded)
			check("decoded and loaded", &loaded)
		})
	}
}
