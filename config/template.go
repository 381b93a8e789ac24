package config

import (
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// templateVars is the set of ${...} variables one attribute accepts. The
// agent substitutes them at run time; at decode time each evaluates to its own
// spelling, so "sites/${device_id}" decodes to the string "sites/${device_id}".
type templateVars []string

// The variable sets of the template attributes.
var (
	noVars         templateVars
	deviceIDVars   = templateVars{"device_id"}
	sinkTopicVars  = templateVars{"device_id", "pipeline", "key", "window_start", "window_end"}
	simulatorVars  = templateVars{"sensor"}
	aclVars        = templateVars{"device_id", "username"}
	allTemplateVar = templateVars{"device_id", "pipeline", "key", "window_start", "window_end", "sensor"}
)

func (tv templateVars) has(name string) bool { return slices.Contains(tv, name) }

// values returns the evaluation-context variables: each name bound to its own
// "${name}" spelling.
func (tv templateVars) values() map[string]cty.Value {
	if len(tv) == 0 {
		return nil
	}
	m := make(map[string]cty.Value, len(tv))
	for _, n := range tv {
		m[n] = cty.StringVal("${" + n + "}")
	}
	return m
}

// describe lists the variables for a Detail, e.g. `${device_id} and ${key}`.
func (tv templateVars) describe() string {
	if len(tv) == 0 {
		return "no ${...} variables"
	}
	parts := make([]string, len(tv))
	for i, n := range tv {
		parts[i] = "${" + n + "}"
	}
	if len(parts) == 1 {
		return "only " + parts[0]
	}
	return "only " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// templateNames returns the names of the ${name} placeholders in a decoded
// string, in order, including those written escaped as $${name}.
func templateNames(s string) []string {
	var names []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return names
		}
		s = s[i+2:]
		j := strings.IndexByte(s, '}')
		if j < 0 {
			return names
		}
		names = append(names, strings.TrimSpace(s[:j]))
		s = s[j+1:]
	}
}

// Expand returns template with every ${name} replaced by vars[name]; a
// placeholder whose name is not in vars stays as written. Decoding has already
// checked that a template names only the variables its attribute allows, so
// the agent calls Expand with those at run time, e.g.
// Expand(sink.MQTT.Topic, map[string]string{"device_id": id, "key": k, ...}).
func Expand(template string, vars map[string]string) string {
	if !strings.Contains(template, "${") {
		return template
	}
	var b strings.Builder
	b.Grow(len(template) + 32) // one allocation for typical ids and keys
	s := template
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		if v, ok := vars[strings.TrimSpace(s[i+2:i+j])]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
}
