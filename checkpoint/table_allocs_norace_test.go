//go:build !race

// Allocation counts: the race detector makes sync.Pool drop items (the
// zstd decoder's among them), so this runs in the non-race pass.

package checkpoint

import (
	"math/rand/v2"
	"testing"
)

// TestGetAllocatesNothing checks Get in steady state: its buffers have grown
// to the blocks' size.
func TestGetAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	m := newTableModel(rng, 3, 3000, 300, 8, 40, true)
	tables := m.tables(t, false)
	c := NewChain(tables...)
	defer c.Release()
	var keys [][2]string
	for _, b := range tableBuckets {
		for _, k := range m.keys[b] {
			keys = append(keys, [2]string{b, k})
		}
	}
	get := func() {
		for _, k := range keys {
			if _, _, err := c.Get(k[0], []byte(k[1])); err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := tables[0].Get(k[0], []byte(k[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	get() // grow the buffers
	if n := testing.AllocsPerRun(3, get); n != 0 {
		t.Fatalf("%v allocations per %d Gets", n, 2*len(keys))
	}
}
