package control

import (
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

func show(v event.Value) string {
	if v.Kind == event.String {
		return `"` + string(v.Str) + `"`
	}
	return string(v.AppendText([]byte(v.Kind.String() + " ")))
}

func TestState_Lookup(t *testing.T) {
	s := New()
	mustApply(t, s, `{"threshold":{"d1":30,"d2":"high"},"paused":true,"tags":[1,"a"],"cal":{"d1":{"gain":1.5}}}`)
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"threshold", "d1"}, "number 30"},
		{[]string{"threshold", "d2"}, `"high"`},
		{[]string{"paused"}, "bool true"},
		{[]string{"tags"}, `"[1,"a"]"`},
		{[]string{"cal"}, `"{"d1":{"gain":1.5}}"`},
		{[]string{"cal", "d1", "gain"}, "number 1.5"},
		{[]string{"threshold", "d3"}, "missing null"},
		{[]string{"paused", "x"}, "missing null"}, // through a leaf
		{[]string{"tags", "0"}, "missing null"},   // arrays are leaves
		{[]string{"nothing", "at", "all"}, "missing null"},
		{nil, `"{"cal":{"d1":{"gain":1.5}},"paused":true,"tags":[1,"a"],"threshold":{"d1":30,"d2":"high"}}"`},
	} {
		if got := show(s.Lookup(tc.path)); got != tc.want {
			t.Errorf("Lookup(%q) = %s, want %s", tc.path, got, tc.want)
		}
	}
}

func TestState_Index(t *testing.T) {
	s := New()
	mustApply(t, s, `{"threshold":{"d1":30,"3":7},"offset":-1}`)
	for _, tc := range []struct {
		path []string
		key  string
		want string
	}{
		{[]string{"threshold"}, "d1", "number 30"},
		{[]string{"threshold"}, "3", "number 7"},
		{[]string{"threshold"}, "d9", "missing null"},
		{[]string{"offset"}, "d1", "missing null"},
		{nil, "offset", "number -1"},
		{[]string{"none"}, "d1", "missing null"},
	} {
		if got := show(s.Index(tc.path, []byte(tc.key))); got != tc.want {
			t.Errorf("Index(%q, %q) = %s, want %s", tc.path, tc.key, got, tc.want)
		}
	}
}

// TestNode_Value_ObjectTextFollowsChanges checks that a cached object
// text is rebuilt after a change, and that a Value read before the change
// keeps its bytes.
func TestNode_Value_ObjectTextFollowsChanges(t *testing.T) {
	s := New()
	mustApply(t, s, `{"cal":{"d1":1}}`)
	before := s.Lookup([]string{"cal"})
	mustApply(t, s, `{"cal":{"d2":2}}`)
	after := s.Lookup([]string{"cal"})
	if string(before.Str) != `{"d1":1}` || string(after.Str) != `{"d1":1,"d2":2}` {
		t.Fatalf("before %s, after %s", show(before), show(after))
	}
	if err := s.Restore([]byte(`{"cal":{"x":true}}`)); err != nil {
		t.Fatal(err)
	}
	if got := s.Lookup([]string{"cal"}); string(got.Str) != `{"x":true}` {
		t.Fatalf("after Restore: %s", show(got))
	}
}

func TestNode_Walk(t *testing.T) {
	s := New()
	mustApply(t, s, `{"dev":{"d1":{"offset":0.5}},"leaf":1}`)
	n := s.Root().Field("dev").FieldBytes([]byte("d1"))
	if !n.Exists() || !n.IsObject() {
		t.Fatalf("dev.d1 should be an object")
	}
	if got := n.Field("offset").Value(); got.Num != 0.5 {
		t.Fatalf("offset = %s", show(got))
	}
	if n := s.Root().Field("leaf").Field("x"); n.Exists() {
		t.Fatal("a leaf has no members")
	}
	var zero Node
	if zero.Exists() || zero.Field("a").Exists() || zero.Value().Kind != event.Missing {
		t.Fatal("the zero Node is nothing")
	}
}

// TestState_Lookup_ZeroAllocs pins that reading the state on the
// per-reading path allocates nothing, including an object text once
// cached.
func TestState_Lookup_ZeroAllocs(t *testing.T) {
	s := New()
	mustApply(t, s, `{"threshold":{"dev-0042":30},"cal":{"dev-0042":{"offset":0.5}},"g":1}`)
	path := []string{"threshold"}
	static := []string{"cal", "dev-0042", "offset"}
	obj := []string{"cal"}
	key := []byte("dev-0042")
	var sink event.Value
	run := func() {
		sink = s.Index(path, key)
		sink = s.Lookup(static)
		sink = s.Lookup(obj)
		sink = s.Root().Field("cal").FieldBytes(key).Field("offset").Value()
	}
	run()
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Fatalf("%v allocs per lookup round, want 0", n)
	}
	_ = sink
}

var sinkValue event.Value

func BenchmarkState_Index(b *testing.B) {
	s := New()
	mustApply(b, s, `{"threshold":{"dev-0042":30}}`)
	for i := range 1000 {
		mustApply(b, s, `{"threshold":{"dev-`+string(rune('a'+i%26))+string(rune('a'+i/26%26))+`":1}}`)
	}
	path, key := []string{"threshold"}, []byte("dev-0042")
	b.ReportAllocs()
	for b.Loop() {
		sinkValue = s.Index(path, key)
	}
}

func BenchmarkState_Apply(b *testing.B) {
	s := New()
	msg := []byte(`{"threshold":{"dev-0042":30,"dev-0043":31},"cal":{"dev-0042":{"offset":0.5}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Apply(msg); err != nil {
			b.Fatal(err)
		}
	}
}
