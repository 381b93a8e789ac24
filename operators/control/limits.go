package control

// MaxDepth is the deepest nesting of objects and arrays a message may
// have; the message object itself is depth 1. Deeper input is
// ErrMalformed, so no message can make lookups or snapshots recurse
// without bound.
const MaxDepth = 32

// Defaults for Limits fields left zero.
const (
	DefaultMaxKeys  = 100_000
	DefaultMaxBytes = 8 << 20
)

// Limits bound the memory a State holds. A message that would take the
// state over a limit is refused whole with ErrLimit.
type Limits struct {
	// MaxKeys bounds the number of keys in the state, counted over every
	// object at every level: {"threshold": {"d1": 30, "d2": 31}} has 3.
	// Zero means DefaultMaxKeys (100k).
	MaxKeys int
	// MaxBytes bounds the bytes of keys, string values and array texts in
	// the state, summed. Numbers and bools count nothing beyond their key.
	// It does not cover map overhead (roughly 100 bytes per key) or the
	// texts of objects cached by Node.Value. Zero means DefaultMaxBytes
	// (8 MiB).
	MaxBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxKeys <= 0 {
		l.MaxKeys = DefaultMaxKeys
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}
