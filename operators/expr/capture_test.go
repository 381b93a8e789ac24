package expr

import (
	"reflect"
	"testing"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestControlPaths_CaptureDecode compiles expressions against captured
// control values, captures a state, and checks what the programs read
// from the decoded vector: each kind as the state holds it, objects as
// their JSON text, absent values missing; a vector captured under
// another list of paths reads by name; an empty vector (a reading
// buffered without one) reads every value missing; a cut vector is an
// error. (Its allocations: TestControlPaths_NoAllocs.)
func TestControlPaths_CaptureDecode(t *testing.T) {
	schema := event.NewSchema()
	var paths ControlPaths
	compile := func(src string) *Program {
		e, _ := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		p, diags := CompileWith(e, schema, Options{ControlCapture: &paths})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return p
	}
	progs := map[string]*Program{}
	for _, src := range []string{`control.limit`, `control.name`, `control.on`, `control.t["d1"]`, `control.t`, `control.gone`, `control.limit + 1`} {
		progs[src] = compile(src)
	}
	if got, want := paths.Paths(), [][]string{{"limit"}, {"name"}, {"on"}, {"t", "d1"}, {"t"}, {"gone"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("paths %q, want %q", got, want)
	}
	st := control.New()
	if err := st.Apply([]byte(`{"limit":30,"name":"hot","on":true,"t":{"d1":2}}`)); err != nil {
		t.Fatal(err)
	}
	vec := paths.AppendCapture(nil, st)

	// Another pipeline version read only control.t["d1"] and control.x.
	var other ControlPaths
	other.index([]string{"x"})
	other.index([]string{"t", "d1"})
	otherVec := other.AppendCapture(nil, st)

	text := func(v event.Value) string { return v.Kind.String() + ":" + string(v.AppendText(nil)) }
	for _, c := range []struct {
		name string
		vec  []byte
		want map[string]string
	}{
		{"captured", vec, map[string]string{`control.limit`: "number:30", `control.name`: "string:hot", `control.on`: "bool:true",
			`control.t["d1"]`: "number:2", `control.t`: `string:{"d1":2}`, `control.gone`: "missing:null", `control.limit + 1`: "number:31"}},
		{"another list of paths", otherVec, map[string]string{`control.limit`: "missing:null", `control.t["d1"]`: "number:2", `control.limit + 1`: "null:null"}},
		{"no vector", nil, map[string]string{`control.limit`: "missing:null", `control.t`: "missing:null"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec event.Record
			var err error
			if rec.Control, err = paths.Decode(c.vec, rec.Control); err != nil {
				t.Fatal(err)
			}
			for src, want := range c.want {
				if got := text(progs[src].Eval(&rec)); got != want {
					t.Errorf("%s = %s, want %s", src, got, want)
				}
			}
		})
	}
	for n := 1; n < len(vec); n++ {
		if _, err := paths.Decode(vec[:n], nil); err == nil {
			t.Fatalf("vector cut to %d bytes decoded", n)
		}
	}
}
