package control

import "slices"

// The canonical JSON form, used by Snapshot and for array and object
// texts: no insignificant space; object keys in byte order; strings and
// numbers as package jsontext writes them (U+2028 and U+2029 escaped, any
// invalid UTF-8 byte as \ufffd; numbers in the shortest form that
// round-trips, in plain notation from 1e-6 up to 1e21 and in exponent
// notation, 1e+21 or 1e-7, outside it). One state has one text.

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
