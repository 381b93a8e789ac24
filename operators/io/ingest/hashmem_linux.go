package ingest

import (
	"syscall"
	"unsafe"
)

// mapHashes returns room for n hashes in an anonymous private mapping,
// outside the Go heap (pages become resident as they are written), and the
// mapping; on the heap, with a nil mapping, when mmap fails.
func mapHashes(n int) ([]uint64, []byte) {
	mem, err := syscall.Mmap(-1, 0, n*8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]uint64, 0, n), nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(mem))), n)[:0], mem
}

// unmapHashes releases a mapping of mapHashes (nil: nothing to do).
func unmapHashes(mem []byte) {
	if mem != nil {
		_ = syscall.Munmap(mem)
	}
}
