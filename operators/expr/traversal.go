package expr

import (
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// rootEvent names the reading; control (rootControl) is the only other
// variable, and only when Options.Control is set.
const rootEvent = "event"

// traversal compiles event.a.b (or event["a"]["b"]) into a slot read, and
// control.a.b into a read of the control state.
func (c *compiler) traversal(e *hclsyntax.ScopeTraversalExpr) node {
	if e.Traversal.RootName() == rootControl {
		return c.controlRef(e)
	}
	path, ok := c.eventPath(e.Traversal, e.SrcRange)
	if !ok {
		return bad(e.SrcRange)
	}
	return field(c.schema.Slot(path), e.SrcRange)
}

// field returns a node reading slot as it is. A record with fewer fields
// than the schema (one reset for another schema) reads as missing.
func field(slot int, rng hcl.Range) node {
	return node{
		eval: func(rec *event.Record) event.Value {
			if slot < len(rec.Fields) {
				return rec.Fields[slot]
			}
			return event.Value{}
		},
		rng:  rng,
		slot: slot,
	}
}

// eventPath turns a traversal rooted at event into a field path, reporting
// a diagnostic on the offending step otherwise.
func (c *compiler) eventPath(t hcl.Traversal, rng hcl.Range) (event.Path, bool) {
	root, ok := t[0].(hcl.TraverseRoot)
	if !ok {
		c.errorf(rng, "Invalid reference", "A reference must start with event.")
		return nil, false
	}
	switch root.Name {
	case rootEvent:
	default:
		detail := "Expressions can read only event fields, as in event.temp."
		names := []string{rootEvent}
		if c.control != nil || c.capture != nil {
			detail = "Expressions can read only event fields and control values, as in event.temp or control.threshold."
			names = append(names, rootControl)
		}
		if s := nameSuggestion(root.Name, names); s != "" {
			detail = "There is no variable named \"" + root.Name + "\". Did you mean \"" + s + "\"?"
		}
		c.errorf(root.SrcRange, "Unknown variable", "%s", detail)
		return nil, false
	}
	if len(t) == 1 {
		c.errorf(rng, "Missing field name",
			"event is the whole reading; name one of its fields, as in event.temp.")
		return nil, false
	}
	path := make(event.Path, 0, len(t)-1)
	for _, step := range t[1:] {
		switch step := step.(type) {
		case hcl.TraverseAttr:
			path = append(path, step.Name)
		case hcl.TraverseIndex:
			k := step.Key
			if k.IsNull() || !k.IsKnown() || k.Type() != cty.String {
				c.errorf(step.SrcRange, "Invalid field name",
					`A field index must be a constant string, as in event["name"]; lists are not supported.`)
				return nil, false
			}
			path = append(path, k.AsString())
		default:
			c.errorf(step.SourceRange(), "Unsupported expression", "Eddy expressions do not support splats.")
			return nil, false
		}
	}
	return path, true
}
