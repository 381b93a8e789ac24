package checkpoint

import "fmt"

// Kind is the kind of a checkpoint or of a snapshot file. The zero value is
// invalid, so a forgotten field is caught.
type Kind uint8

const (
	// KindFull is a self-contained snapshot of all state.
	KindFull Kind = iota + 1
	// KindIncremental holds only the entries changed (or deleted) since the
	// parent checkpoint; it is applied on top of its parent's chain.
	KindIncremental
	// KindSavepoint is a full, self-contained checkpoint taken on request
	// that retention never deletes. Snapshot files of a savepoint are
	// KindFull.
	KindSavepoint
)

// String returns the name used in manifests: "full", "incremental",
// "savepoint", or "invalid(n)".
func (k Kind) String() string {
	switch k {
	case KindFull:
		return "full"
	case KindIncremental:
		return "incremental"
	case KindSavepoint:
		return "savepoint"
	}
	return fmt.Sprintf("invalid(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler; an invalid Kind is an error.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.valid() {
		return nil, fmt.Errorf("checkpoint: invalid kind %d", uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	for _, c := range []Kind{KindFull, KindIncremental, KindSavepoint} {
		if string(b) == c.String() {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("checkpoint: unknown kind %q", b)
}

func (k Kind) valid() bool { return k >= KindFull && k <= KindSavepoint }

// Mode is the checkpointing guarantee. The zero value is invalid.
type Mode uint8

const (
	// ExactlyOnce aligns barriers: a task with several inputs holds back an
	// input that delivered barrier n until every input did, so the snapshot
	// reflects exactly the records before n.
	ExactlyOnce Mode = iota + 1
	// AtLeastOnce never blocks an input; records that arrive after barrier n
	// on one input but before it on another enter snapshot n and are
	// replayed again after a restore.
	AtLeastOnce
)

// String returns "exactly_once", "at_least_once" or "invalid(n)".
func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly_once"
	case AtLeastOnce:
		return "at_least_once"
	}
	return fmt.Sprintf("invalid(%d)", uint8(m))
}
