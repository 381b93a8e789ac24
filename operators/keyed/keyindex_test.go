package keyed

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyIndex_MatchesMap admits and drops random keys, short and long,
// through the object cache's slots and index, and checks every key's
// lookup against a map after each step: removals shift entries back
// without breaking another key's probe sequence, growth keeps them all.
func TestKeyIndex_MatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := objCache{index: newKeyIndex(), budget: 1 << 30}
	model := map[string]int32{}
	keyOf := func(i int) string {
		if i%7 == 0 {
			return fmt.Sprintf("a-long-key-beyond-the-inline-bytes-%d", i)
		}
		return fmt.Sprintf("k%d", i)
	}
	for step := range 20000 {
		k := keyOf(rng.IntN(600))
		if slot, ok := model[k]; ok {
			c.drop(slot)
			delete(model, k)
		} else {
			model[k] = c.admit(c.index.hash([]byte(k)), 0, []byte(k))
		}
		if step%97 != 0 {
			continue
		}
		for i := range 600 {
			k := keyOf(i)
			want, ok := model[k]
			if !ok {
				want = -1
			}
			if got := c.index.find(c.index.hash([]byte(k)), []byte(k), c.slots); got != want {
				t.Fatalf("step %d: key %s in slot %d, want %d", step, k, got, want)
			}
			if ok && string(c.slots[want].key()) != k {
				t.Fatalf("step %d: slot %d holds %q, want %q", step, want, c.slots[want].key(), k)
			}
		}
		if c.index.n != len(model) {
			t.Fatalf("step %d: %d indexed, want %d", step, c.index.n, len(model))
		}
	}
}
