package operators

import (
	"testing"

	"github.com/eddy-edge/eddy/operators/decode"
	"github.com/eddy-edge/eddy/operators/event"
)

// props are MQTT 5 properties as a PUBLISH encodes them: user properties
// site=north and line=2, then the content type.
var props = []byte("\x26\x00\x04site\x00\x05north\x26\x00\x04line\x00\x012\x03\x00\x10application/json")

// TestPreparer_Meta: filter and key read the message's topic, user
// properties and content type; a payload field of the same names does not
// stand in for them; nothing is allocated.
func TestPreparer_Meta(t *testing.T) {
	schema := event.NewSchema()
	spec := PrepareSpec{Schema: schema, Parallelism: 1}
	spec.Filter = mustCompile(t, `meta.user_properties.site == "north" && meta.content_type == "application/json" && has(meta.user_properties["line"])`, schema)
	spec.Key = mustCompile(t, `"${meta.topic}/${meta.user_properties.line}"`, schema)
	spec.Decoder = decode.NewJSON(schema)
	p := NewPreparer(spec)
	for _, tt := range []struct {
		name, payload string
		props         []byte
		want          Outcome
		key           string
	}{
		{"properties", `{"v":1}`, props, Pass, "sensors/a/2"},
		{"no properties", `{"v":1}`, nil, Filtered, ""},
		{"other site", `{"v":1}`, []byte("\x26\x00\x04site\x00\x05south"), Filtered, ""},
		{"payload named meta", `{"meta":{"user_properties":{"site":"north"}}}`, nil, Filtered, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.PrepareMessage([]byte(tt.payload), "sensors/a", tt.props, 1, 0, 0, true); got != tt.want || (got == Pass && string(p.Key) != tt.key) {
				t.Errorf("outcome %d key %q, want %d %q (reject %+v)", got, p.Key, tt.want, tt.key, p.Reject)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { p.PrepareMessage([]byte(`{"v":1}`), "sensors/a", props, 1, 0, 0, true) }); n != 0 {
		t.Errorf("%.1f allocations per message, want 0", n)
	}
}
