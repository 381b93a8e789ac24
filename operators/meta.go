package operators

import (
	"github.com/eddy-edge/eddy/operators/event"
	"github.com/eddy-edge/eddy/operators/mqttprops"
)

// metaSlot is a metadata path of a pipeline's schema: what it reads
// (topic, content type, or the user property named prop) and its slot.
type metaSlot struct {
	slot int
	kind string // event.MetaTopic, MetaContentType or MetaUserProperties
	prop string
}

// metaSlots lists the metadata paths of schema.
func metaSlots(schema *event.Schema) []metaSlot {
	var out []metaSlot
	for slot, p := range schema.Paths() {
		if !p.IsMeta() || len(p) < 2 {
			continue
		}
		m := metaSlot{slot: slot, kind: p[1]}
		if len(p) > 2 {
			m.prop = p[2]
		}
		out = append(out, m)
	}
	return out
}

// fillMeta writes the message's metadata into its slots, after decoding
// (so a payload cannot stand in for it): the topic, and from rec.Props the
// content type and user properties, each a string aliasing the record's
// own bytes, or missing. A user property sent more than once reads as its
// first value. Nothing is allocated.
func fillMeta(rec *event.Record, slots []metaSlot) {
	for _, m := range slots {
		if m.slot >= len(rec.Fields) {
			continue
		}
		v := event.Value{}
		switch m.kind {
		case event.MetaTopic:
			v = event.StringValue(rec.Topic)
		case event.MetaContentType:
			for p := mqttprops.New(rec.Props); p.Next(); {
				if p.ID == mqttprops.PropContentType {
					v = event.StringValue(mqttprops.String(p.Value))
					break
				}
			}
		case event.MetaUserProperties:
			for p := mqttprops.New(rec.Props); p.Next(); {
				if p.ID != mqttprops.PropUser {
					continue
				}
				if k, val := mqttprops.Pair(p.Value); string(k) == m.prop {
					v = event.StringValue(val)
					break
				}
			}
		}
		rec.Fields[m.slot] = v
	}
}
