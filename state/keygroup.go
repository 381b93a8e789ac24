package state

// DefaultMaxKeyGroups is the number of key groups when the configuration does
// not set one. It is fixed for the life of the state: changing it makes every
// checkpoint unrestorable, while the parallelism may change freely.
const DefaultMaxKeyGroups = 128

// KeyGroup maps a key to its key group: FNV-1a 64 of the key bytes modulo
// maxKeyGroups. The hash is stable across processes, architectures and Go
// versions (unlike hash/maphash, which is seeded per process), so state
// written on one device restores on another.
func KeyGroup(key []byte, maxKeyGroups int) uint16 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for _, c := range key {
		h ^= uint64(c)
		h *= prime64
	}
	return uint16(h % uint64(maxKeyGroups))
}

// Subtask returns the parallel subtask (0 ≤ subtask < parallelism) that owns
// keyGroup, as Flink assigns key groups to operator instances: contiguous
// ranges, keyGroup × parallelism / maxKeyGroups.
func Subtask(keyGroup uint16, parallelism, maxKeyGroups int) int {
	return int(keyGroup) * parallelism / maxKeyGroups
}
