package state

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// The overlay is ordered by (bucket rank, key) as bytes.Compare orders
// keys: keys that are prefixes of others, that differ only after the
// integer-compared first 14 bytes, or whose zero bytes meet another key's
// end included.
func TestSnapshot_SortOverlay(t *testing.T) {
	for _, tt := range []struct {
		name string
		keys []string
	}{
		{"empty", nil},
		{"prefixes and zero bytes", []string{"", "a", "a\x00", "a\x00\x00", "a\x00b", "ab", "\x00", "\x00\x00", "\xff"}},
		{"beyond 14 bytes", []string{"0123456789abcdX", "0123456789abcdA", "0123456789abcd", "0123456789abcd\x00", "0123456789abc", "0123456789abcdA\x00"}},
		{"window keys", []string{"\x00\x05\x0esensor-0000001\x00\x00\x00\x00\x00\x00\x00\x02", "\x00\x05\x0esensor-0000001\x00\x00\x00\x00\x00\x00\x00\x01", "\x00\x05\x0esensor-0000133\x00\x00\x00\x00\x00\x00\x00\x01", "\x00\x04\x0esensor-0000132\x00"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rank := []int{2, 0, 1} // bucket 1 first, then 2, then 0
			var overlay []overlayEntry
			for b := range Bucket(3) {
				for _, k := range tt.keys {
					overlay = append(overlay, overlayEntry{bucket: b, key: []byte(k), val: []byte{byte(b)}})
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			r.Shuffle(len(overlay), func(i, j int) { overlay[i], overlay[j] = overlay[j], overlay[i] })
			want := slices.Clone(overlay)
			slices.SortFunc(want, func(x, y overlayEntry) int {
				if x.bucket != y.bucket {
					return rank[x.bucket] - rank[y.bucket]
				}
				return bytes.Compare(x.key, y.key)
			})
			b := &snapBufs{rank: rank}
			for range 2 { // the second time with the buffers of the first
				got := b.sortOverlay(slices.Clone(overlay))
				if !slices.EqualFunc(got, want, func(x, y overlayEntry) bool {
					return x.bucket == y.bucket && bytes.Equal(x.key, y.key) && bytes.Equal(x.val, y.val)
				}) {
					t.Fatalf("sorted %q, want %q", keysOf(got), keysOf(want))
				}
			}
		})
	}
}

func keysOf(o []overlayEntry) []string {
	var out []string
	for _, e := range o {
		out = append(out, string(rune('0'+e.bucket))+":"+string(e.key))
	}
	return out
}
