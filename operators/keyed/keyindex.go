package keyed

import "hash/maphash"

// keyIndex finds the object cache slot of a key. It is a Go map's job, but
// at 100,000 keys a map[string]int32 lookup is a chain of cache misses
// (its control word, its slot, the key's bytes elsewhere on the heap), the
// largest cost of a reading in the keyed benchmark. Here a probe is one
// 8-byte word in a table (open addressing, linear probing, at most half
// full) holding a 32-bit tag of the key's hash and the slot, and the key
// is compared in the slot itself (objSlot keeps short keys inline).
type keyIndex struct {
	table []uint64 // 0: empty; else tag:u32 | slot+1:u32
	n     int
	seed  maphash.Seed
}

// newKeyIndex returns an empty index. Its seed is random, as a Go map's:
// keys come from devices, and a fixed hash could be flooded with colliding
// ones; only the table's layout depends on it, never a result.
func newKeyIndex() keyIndex { return keyIndex{seed: maphash.MakeSeed()} }

func (x *keyIndex) hash(key []byte) uint64 { return maphash.Bytes(x.seed, key) }

// find returns the slot of key (whose hash is h) among slots, or -1.
func (x *keyIndex) find(h uint64, key []byte, slots []objSlot) int32 {
	if len(x.table) == 0 {
		return -1
	}
	mask := uint64(len(x.table) - 1)
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		v := x.table[i]
		if v == 0 {
			return -1
		}
		if uint32(v>>32) == tag {
			if s := int32(uint32(v) - 1); slots[s].hasKey(key) {
				return s
			}
		}
	}
}

// insert adds slot, whose key has hash h and is not in the index.
func (x *keyIndex) insert(h uint64, slot int32, slots []objSlot) {
	if 2*(x.n+1) > len(x.table) {
		x.grow(slots)
	}
	x.put(h, slot)
	x.n++
}

func (x *keyIndex) put(h uint64, slot int32) {
	mask := uint64(len(x.table) - 1)
	i := h & mask
	for x.table[i] != 0 {
		i = (i + 1) & mask
	}
	x.table[i] = h>>32<<32 | uint64(uint32(slot)+1)
}

// grow doubles the table and puts the resident slots back.
func (x *keyIndex) grow(slots []objSlot) {
	x.table = make([]uint64, max(64, 2*len(x.table)))
	for i := range slots {
		if slots[i].used {
			x.put(slots[i].hash, int32(i))
		}
	}
}

// remove deletes slot, whose key has hash h, shifting the entries after it
// back so no probe sequence is broken (no tombstones).
func (x *keyIndex) remove(h uint64, slot int32, slots []objSlot) {
	mask := uint64(len(x.table) - 1)
	want := uint64(uint32(slot) + 1)
	i := h & mask
	for uint64(uint32(x.table[i])) != want {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		v := x.table[j]
		if v == 0 {
			break
		}
		home := slots[uint32(v)-1].hash & mask
		// v may move to the hole at i unless its home lies cyclically in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			x.table[i] = v
			i = j
		}
	}
	x.table[i] = 0
	x.n--
}
