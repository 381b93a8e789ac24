//go:build !race

package expr

import (
	"testing"

	"github.com/eddy-edge/eddy/operators/control"
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestControlPaths_NoAllocs checks that capturing control values into a
// reused buffer and decoding them allocate nothing.
func TestControlPaths_NoAllocs(t *testing.T) {
	schema := event.NewSchema()
	var paths ControlPaths
	for _, src := range []string{`control.limit`, `control.name`, `control.t`} {
		e, _ := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		if _, diags := CompileWith(e, schema, Options{ControlCapture: &paths}); diags.HasErrors() {
			t.Fatal(diags)
		}
	}
	st := control.New()
	if err := st.Apply([]byte(`{"limit":30,"name":"hot","t":{"d1":2}}`)); err != nil {
		t.Fatal(err)
	}
	vec := paths.AppendCapture(nil, st)
	dst := make([]event.Value, 0, paths.Len())
	if a := testing.AllocsPerRun(100, func() {
		vec = paths.AppendCapture(vec[:0], st)
		dst, _ = paths.Decode(vec, dst)
	}); a != 0 {
		t.Errorf("%v allocations per capture and decode, want 0", a)
	}
}
