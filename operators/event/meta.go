package event

// MetaRoot is the first step of the Schema paths of a message's metadata,
// which expressions read as meta.topic, meta.content_type and
// meta.user_properties.NAME: the slots of {MetaRoot, "topic"},
// {MetaRoot, "content_type"} and {MetaRoot, "user_properties", NAME}. A
// JSON field name would need a NUL character to reach them, and the
// metadata is written into its slots after the payload is decoded
// (operators.Preparer), so a payload cannot stand in for it.
const MetaRoot = "\x00meta"

// Metadata fields under MetaRoot.
const (
	MetaTopic          = "topic"
	MetaContentType    = "content_type"
	MetaUserProperties = "user_properties"
)

// IsMeta reports whether p is a metadata path.
func (p Path) IsMeta() bool { return len(p) > 0 && p[0] == MetaRoot }

// MetaString is how a metadata path is written in an expression:
// meta.topic, meta.user_properties.site.
func (p Path) MetaString() string {
	s := "meta"
	for _, step := range p[1:] {
		s += "." + step
	}
	return s
}
