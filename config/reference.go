package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// refParts splits a reference expression like source.mqtt.sensors into its
// three names, or reports why it is not one.
func (d *decoder) refParts(expr hcl.Expression, kind, field, example string) (typ, name string, ok bool) {
	tr, diags := hcl.AbsTraversalForExpr(expr)
	if diags.HasErrors() || len(tr) != 3 || tr.RootName() != kind {
		d.errorf(expr.Range(), "Invalid reference", "%q must name a %s like %s.", field, kind, example)
		return "", "", false
	}
	a1, ok1 := tr[1].(hcl.TraverseAttr)
	a2, ok2 := tr[2].(hcl.TraverseAttr)
	if !ok1 || !ok2 {
		d.errorf(expr.Range(), "Invalid reference", "%q must name a %s like %s.", field, kind, example)
		return "", "", false
	}
	return a1.Name, a2.Name, true
}

// resolveSource resolves a from expression, or reports it with a suggestion.
func (d *decoder) resolveSource(expr hcl.Expression, sources []*Source) *Source {
	typ, name, ok := d.refParts(expr, "source", "from", "source.mqtt.sensors")
	if !ok {
		return nil
	}
	var refs []string
	for _, s := range sources {
		if s.Type == typ && s.Name == name {
			return s
		}
		refs = append(refs, fmt.Sprintf("source.%s.%s", s.Type, s.Name))
	}
	d.errorf(expr.Range(), "Reference to undeclared source", "There is no source %q of type %q.%s",
		name, typ, refSuggestion("source", typ, name, refs, func(i int) (string, string) { return sources[i].Type, sources[i].Name }))
	return nil
}

// resolveSink resolves a sink reference in field, or reports it with a
// suggestion.
func (d *decoder) resolveSink(expr hcl.Expression, sinks []*Sink, field string) *Sink {
	typ, name, ok := d.refParts(expr, "sink", field, "sink.mqtt.cloud")
	if !ok {
		return nil
	}
	var refs []string
	for _, s := range sinks {
		if s.Type == typ && s.Name == name {
			return s
		}
		refs = append(refs, fmt.Sprintf("sink.%s.%s", s.Type, s.Name))
	}
	d.errorf(expr.Range(), "Reference to undeclared sink", "There is no sink %q of type %q.%s",
		name, typ, refSuggestion("sink", typ, name, refs, func(i int) (string, string) { return sinks[i].Type, sinks[i].Name }))
	return nil
}

// refSuggestion suggests a declared reference: the same name under another
// type first (a wrong type label), else the closest name of the same type,
// else the closest whole reference.
func refSuggestion(kind, typ, name string, refs []string, at func(int) (string, string)) string {
	var sameType []string
	for i := range refs {
		t, n := at(i)
		if n == name {
			return fmt.Sprintf(" Did you mean %s.%s.%s?", kind, t, n)
		}
		if t == typ {
			sameType = append(sameType, n)
		}
	}
	if s := suggest(name, sameType); s != "" {
		return fmt.Sprintf(" Did you mean %q (%s.%s.%s)?", s, kind, typ, s)
	}
	if s := suggest(fmt.Sprintf("%s.%s.%s", kind, typ, name), refs); s != "" {
		return " Did you mean " + s + "?"
	}
	if len(refs) == 0 {
		return fmt.Sprintf(" Declare it with a %s block.", kind)
	}
	return ""
}
