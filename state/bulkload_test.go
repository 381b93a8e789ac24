package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A restore writes the ordered base of a chain as bbolt pages directly, then
// applies the increments through bbolt: the file passes bbolt's own
// consistency check and holds exactly the chain's final state, for bases
// from empty to three-level trees, with values of every size (empty, and
// larger than a page: overflow pages), several buckets, and a key-group
// filter.
func TestBolt_RestoreBulkLoad(t *testing.T) {
	tests := []struct {
		name       string
		keys       int
		maxVal     int
		increments bool
		filter     *KeyGroupRange
	}{
		{"empty", 0, 0, false, nil},
		{"one entry", 1, 10, false, nil},
		{"one page", 50, 20, false, nil},
		{"two levels", 5000, 60, false, nil},
		{"three levels", 30_000, 40, false, nil},
		{"overflow values", 300, 20_000, false, nil},
		{"with increments", 20_000, 80, true, nil},
		{"key groups", 20_000, 30, true, &KeyGroupRange{First: 2, Last: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tt.keys), 7))
			buckets := []string{"a/timers", "a/windows", "b/other"}
			want := map[string]string{}
			type ent struct {
				bucket, key, value string
				deleted            bool
			}
			var chain []ent
			for _, b := range buckets { // the base, in (bucket, key) order
				var keys []string
				for i := range tt.keys {
					keys = append(keys, string([]byte{0, byte(i % 8)})+fmt.Sprintf("k%09d", i))
				}
				slices.Sort(keys)
				for _, k := range keys {
					v := string(bytes.Repeat([]byte{byte(r.IntN(256))}, r.IntN(tt.maxVal+1)))
					chain = append(chain, ent{b, k, v, false})
				}
			}
			if tt.increments {
				for range 3 {
					for range tt.keys / 10 {
						b := buckets[r.IntN(len(buckets))]
						k := string([]byte{0, byte(r.IntN(8))}) + fmt.Sprintf("k%09d", r.IntN(tt.keys*2))
						if r.IntN(4) == 0 {
							chain = append(chain, ent{b, k, "", true})
						} else {
							chain = append(chain, ent{b, k, fmt.Sprint(r.Int()), false})
						}
					}
				}
			}
			for _, e := range chain {
				if tt.filter != nil && !tt.filter.Contains(uint16(e.key[0])<<8|uint16(e.key[1])) {
					continue
				}
				if e.deleted {
					delete(want, e.bucket+"|"+e.key)
				} else {
					want[e.bucket+"|"+e.key] = e.value
				}
			}
			be := openTestBolt(t, BoltOptions{MaxSize: 256 << 20})
			for _, b := range buckets {
				be.Bucket(b, KeyGroupPrefix)
			}
			err := be.Restore(func(fn func(b, k, v []byte, del bool) error) error {
				for _, e := range chain {
					if err := fn([]byte(e.bucket), []byte(e.key), []byte(e.value), e.deleted); err != nil {
						return err
					}
				}
				return nil
			}, RestoreOptions{KeyGroups: tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			if err := be.db.View(func(tx *bolt.Tx) error {
				for err := range tx.Check() {
					t.Error(err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if got := dump(t, be, buckets); !mapsEqual(got, want) {
				t.Fatalf("%d entries after restore, want %d", len(got), len(want))
			}
			// The store goes on working: writes, a flush, a snapshot.
			b0, _ := be.Bucket(buckets[0], KeyGroupPrefix)
			for i := range 1000 {
				k := []byte{0, byte(i % 8), 'n', byte(i), byte(i >> 8)}
				if err := be.Put(b0, k, []byte("new")); err != nil {
					t.Fatal(err)
				}
				want[buckets[0]+"|"+string(k)] = "new"
			}
			if got := dump(t, be, buckets); !mapsEqual(got, want) {
				t.Fatalf("%d entries after writes, want %d", len(got), len(want))
			}
			if err := be.db.View(func(tx *bolt.Tx) error {
				for err := range tx.Check() {
					t.Error(err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A base larger than max_size fails with ErrFull, and the backend can be
// restored again.
func TestBolt_RestoreBulkLoadFull(t *testing.T) {
	be := openTestBolt(t, BoltOptions{MaxSize: 1 << 20})
	big := make([]byte, 100_000)
	entries := func(n int) Entries {
		return func(fn func(b, k, v []byte, del bool) error) error {
			for i := range n {
				if err := fn([]byte("b"), fmt.Appendf(nil, "k%04d", i), big, false); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := be.Restore(entries(50), RestoreOptions{}); !errors.Is(err, ErrFull) {
		t.Fatalf("restore of 5 MB into 1 MiB: %v, want ErrFull", err)
	}
	if err := be.Restore(entries(3), RestoreOptions{}); err != nil {
		t.Fatalf("restore after ErrFull: %v", err)
	}
	b, _ := be.Bucket("b", nil)
	if v, ok, err := be.Get(b, []byte("k0002")); err != nil || !ok || len(v) != len(big) {
		t.Fatalf("get after restore: %d bytes, %v, %v", len(v), ok, err)
	}
}
