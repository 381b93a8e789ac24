package expr

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// mustCompile parses and compiles src, failing the test on any diagnostic.
func mustCompile(tb testing.TB, src string, schema *event.Schema) *Program {
	tb.Helper()
	e, diags := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		tb.Fatalf("parse %q: %s", src, diags.Error())
	}
	p, diags := Compile(e, schema)
	if diags.HasErrors() {
		tb.Fatalf("compile %q: %s", src, diags.Error())
	}
	return p
}

// fields describes a reading by dotted path; absent paths are missing.
type fields map[string]event.Value

// newRecord fills a record for schema. Strings are copied into Payload, as
// a decoder would alias them.
func newRecord(schema *event.Schema, fs fields) *event.Record {
	rec := &event.Record{}
	fill(rec, schema, fs)
	return rec
}

func fill(rec *event.Record, schema *event.Schema, fs fields) {
	rec.Reset(schema.Len())
	for path, v := range fs {
		slot := schema.Lookup(event.Path(strings.Split(path, ".")))
		if slot < 0 {
			continue // the expression does not read it
		}
		if v.Kind == event.String {
			start := len(rec.Payload)
			rec.Payload = append(rec.Payload, v.Str...)
			v.Str = rec.Payload[start:len(rec.Payload):len(rec.Payload)]
		}
		rec.Fields[slot] = v
	}
}

func num(f float64) event.Value  { return event.NumberValue(f) }
func str(s string) event.Value   { return event.StringValue([]byte(s)) }
func boolean(b bool) event.Value { return event.BoolValue(b) }

var (
	null    = event.Value{Kind: event.Null}
	missing = event.Value{}
)

// sameValue compares values, treating missing and null alike.
func sameValue(a, b event.Value) bool {
	if a.IsNull() || b.IsNull() {
		return a.IsNull() && b.IsNull()
	}
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == event.String {
		return string(a.Str) == string(b.Str)
	}
	return a.Num == b.Num
}

func show(v event.Value) string {
	if v.Kind == event.String {
		return `"` + string(v.Str) + `"`
	}
	return string(v.AppendText([]byte(v.Kind.String() + " ")))
}
