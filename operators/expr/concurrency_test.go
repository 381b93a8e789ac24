package expr

import (
	"sync"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// TestProgram_ConcurrentUse runs one Program from several goroutines, each
// with its own record, as keyed subtasks do; run it with -race.
func TestProgram_ConcurrentUse(t *testing.T) {
	schema := event.NewSchema()
	p := mustCompile(t, `"${event.site}/${upper(event.device)}/${event.temp * 2}"`, schema)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rec := &event.Record{}
			for i := range 200 {
				fill(rec, schema, fields{"site": str("s"), "device": str("d"), "temp": num(float64(g*1000 + i))})
				got := p.Eval(rec)
				want := "s/D/" + string(num(float64(2*(g*1000+i))).AppendText(nil))
				if string(got.Str) != want {
					t.Errorf("got %q, want %q", got.Str, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCompile_SyntaxErrorNode(t *testing.T) {
	// A placeholder for a syntax error never compiles.
	e := &hclsyntax.ExprSyntaxError{Placeholder: cty.DynamicVal}
	if p, diags := Compile(e, event.NewSchema()); p != nil || !diags.HasErrors() {
		t.Fatalf("Compile of a broken expression: %v, %v", p, diags)
	}
}
