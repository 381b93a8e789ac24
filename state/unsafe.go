package state

import "unsafe"

// unsafeBytes returns the bytes of s without copying; the caller must not
// modify them. Cache keys are strings (shared with the index maps) that are
// handed to bbolt and bytes.Compare as slices.
func unsafeBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
