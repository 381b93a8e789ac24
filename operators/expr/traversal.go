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

// rootMeta names the message's metadata: meta.topic, meta.content_type and
// meta.user_properties.NAME (MQTT 5 sources).
const rootMeta = "meta"

// traversal compiles event.a.b (or event["a"]["b"]) and meta.… into a slot
// read, and control.a.b into a read of the control state.
func (c *compiler) traversal(e *hclsyntax.ScopeTraversalExpr) node {
	if e.Traversal.RootName() == rootControl {
		return c.controlRef(e)
	}
	if e.Traversal.RootName() == rootMeta {
		path, ok := c.metaPath(e.Traversal, e.SrcRange)
		if !ok {
			return bad(e.SrcRange)
		}
		return field(c.schema.Slot(path), e.SrcRange)
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
		detail := "Expressions can read only event fields and the message's metadata, as in event.temp or meta.topic."
		names := []string{rootEvent, rootMeta}
		if c.control != nil || c.capture != nil {
			detail = "Expressions can read only event fields, the message's metadata and control values, as in event.temp, meta.topic or control.threshold."
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
	return c.steps(t[1:], make(event.Path, 0, len(t)-1),
		`A field index must be a constant string, as in event["name"]; lists are not supported.`)
}

// steps appends the names of the attribute and constant string index
// steps of t to path; another index is a diagnostic saying badIndex.
func (c *compiler) steps(t hcl.Traversal, path event.Path, badIndex string) (event.Path, bool) {
	for _, step := range t {
		switch step := step.(type) {
		case hcl.TraverseAttr:
			path = append(path, step.Name)
		case hcl.TraverseIndex:
			k := step.Key
			if k.IsNull() || !k.IsKnown() || k.Type() != cty.String {
				c.errorf(step.SrcRange, "Invalid field name", "%s", badIndex)
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

// metaPath turns a traversal rooted at meta into a metadata path
// (event.MetaRoot): meta.topic, meta.content_type,
// meta.user_properties.NAME or meta.user_properties["NAME"].
func (c *compiler) metaPath(t hcl.Traversal, rng hcl.Range) (event.Path, bool) {
	const hint = "meta is the message's metadata: meta.topic, meta.content_type (MQTT 5), or meta.user_properties.NAME (MQTT 5 user properties, meta.user_properties[\"NAME\"] for any name)."
	steps, ok := c.steps(t[1:], nil, `A user property is named by a constant string, as in meta.user_properties["site"].`)
	if !ok {
		return nil, false
	}
	switch {
	case len(steps) == 1 && (steps[0] == event.MetaTopic || steps[0] == event.MetaContentType):
	case len(steps) == 2 && steps[0] == event.MetaUserProperties:
	default:
		detail := hint
		if len(steps) > 0 {
			if s := nameSuggestion(steps[0], []string{event.MetaTopic, event.MetaContentType, event.MetaUserProperties}); s != "" && s != steps[0] {
				detail = "There is no meta." + steps[0] + ". Did you mean meta." + s + "? " + hint
			}
		}
		c.errorf(rng, "Invalid metadata reference", "%s", detail)
		return nil, false
	}
	return append(event.Path{event.MetaRoot}, steps...), true
}
