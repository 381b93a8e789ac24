package expr

import (
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// templatePart is a literal piece of a template or an interpolation.
type templatePart struct {
	lit  []byte
	eval evalFn // nil for a literal
}

// template compiles "a${x}b" into a string built in rec.Scratch.
// Interpolated numbers are written in their shortest round-trip form and
// bools as true/false; a null interpolation makes the whole result null.
func (c *compiler) template(e *hclsyntax.TemplateExpr) node {
	parts := make([]templatePart, 0, len(e.Parts))
	operands := make([]node, 0, len(e.Parts))
	for _, pe := range e.Parts {
		p := c.expr(pe)
		operands = append(operands, p)
		if p.isConst && p.konst.Kind == event.String {
			// Merge adjacent literals.
			if i := len(parts) - 1; i >= 0 && parts[i].eval == nil {
				parts[i].lit = append(parts[i].lit, p.konst.Str...)
				continue
			}
			parts = append(parts, templatePart{lit: append([]byte(nil), p.konst.Str...)})
			continue
		}
		parts = append(parts, templatePart{eval: p.eval})
	}
	n := node{typ: typeString, rng: e.SrcRange, slot: -1}
	n.eval = func(rec *event.Record) event.Value {
		start, sawNull := len(rec.Scratch), false
		for i := range parts {
			p := &parts[i]
			if p.eval == nil {
				rec.Scratch = append(rec.Scratch, p.lit...)
				continue
			}
			mark := len(rec.Scratch)
			v := p.eval(rec)
			if v.Kind == kindError {
				// Nothing returned aliases the bytes after start.
				rec.Scratch = rec.Scratch[:start]
				return v
			}
			if sawNull || v.IsNull() {
				// The result is null unless a later part fails; keep
				// evaluating only to find out.
				sawNull = true
				continue
			}
			if len(rec.Scratch) != mark {
				// The part built its own string in Scratch after our
				// prefix; copy the prefix past it so the result stays
				// contiguous.
				next := len(rec.Scratch)
				rec.Scratch = append(rec.Scratch, rec.Scratch[start:mark]...)
				start = next
			}
			rec.Scratch = v.AppendText(rec.Scratch)
		}
		if sawNull {
			rec.Scratch = rec.Scratch[:start]
			return nullValue
		}
		end := len(rec.Scratch)
		// Cap the result so a caller appending to it cannot overwrite
		// bytes appended to Scratch later.
		return event.StringValue(rec.Scratch[start:end:end])
	}
	return c.fold(n, operands...)
}
