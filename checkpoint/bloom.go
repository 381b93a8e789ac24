package checkpoint

import (
	"hash/maphash"
	"math/bits"
)

// A Table's Bloom filter over the (bucket, key) of every entry in its file.
// It is built in memory when the Table is opened and never persisted, so
// its hash needs no fixed definition: maphash with one seed per process.
//
// The filter is blocked: a key's bloomProbes bits all fall in one 512-bit
// (cache line) block, so a probe costs one cache miss however many bits it
// tests, and a miss through a chain of a hundred files touches a hundred
// cache lines, not seven hundred. 16 bits per key, not the textbook 10:
// a false positive costs a block read and decompression (~20 µs), and a
// key found in no file (a new window, looked up before it is created)
// is common. Through a base and 100 increments such a miss took 29–33 µs
// at 10 bits (about 1% false positives) and 4.6 µs at 16, for 0.75 byte
// more per entry.
const (
	bloomBitsPerKey = 16
	bloomProbes     = 7 // 7 positions of 9 bits fit in one 64-bit hash
	bloomBlockWords = 8 // 512 bits
)

var bloomSeed = maphash.MakeSeed()

// keyHash is the hash of (bucket, key) every filter of the process uses, so
// a chain computes it once for all its files.
func keyHash(bucket string, key []byte) uint64 {
	return mixHash(maphash.String(bloomSeed, bucket), key)
}

// mixHash combines the hash of a bucket with its key's. The XOR of two
// independent hashes is as good a hash; the multiply spreads it so that
// bucket and key never cancel for equal strings.
func mixHash(bucketHash uint64, key []byte) uint64 {
	return (maphash.Bytes(bloomSeed, key) ^ bucketHash*0x9e3779b97f4a7c15)
}

// bloom is a blocked Bloom filter. The zero value holds nothing and
// answers "maybe" to everything, so a file too small for one block still
// reads correctly.
type bloom struct {
	words []uint64 // len is a multiple of bloomBlockWords
}

// newBloom returns a filter holding the given hashes.
func newBloom(hashes []uint64) bloom {
	if len(hashes) == 0 {
		return bloom{}
	}
	blocks := (len(hashes)*bloomBitsPerKey + 511) / 512
	f := bloom{words: make([]uint64, blocks*bloomBlockWords)}
	for _, h := range hashes {
		f.add(h)
	}
	return f
}

// block returns the first word of h's block; the high bits of h pick it
// (a multiply-shift, no division), the positions come from a remix below.
func (f bloom) block(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(f.words)/bloomBlockWords))
	return int(hi) * bloomBlockWords
}

// positions remixes h so the bit positions do not repeat the block choice.
func positions(h uint64) uint64 {
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>27
}

func (f bloom) add(h uint64) {
	w := f.words[f.block(h):]
	p := positions(h)
	for range bloomProbes {
		bit := p & 511
		w[bit>>6] |= 1 << (bit & 63)
		p >>= 9
	}
}

// mayContain reports false only if no key with hash h was added.
func (f bloom) mayContain(h uint64) bool {
	if len(f.words) == 0 {
		return true
	}
	w := f.words[f.block(h):]
	w = w[:bloomBlockWords]
	p := positions(h)
	for range bloomProbes {
		bit := p & 511
		if w[bit>>6]&(1<<(bit&63)) == 0 {
			return false
		}
		p >>= 9
	}
	return true
}
