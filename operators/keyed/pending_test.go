package keyed

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPending_ReleaseOrder pushes and pops random (time, seq) entries,
// interleaved, and checks every pop returns the smallest entry pushed and
// not yet popped, with its key and payload.
func TestPending_ReleaseOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var p pending
	type ts struct {
		t   int64
		seq uint64
	}
	var model []ts
	for i := range 20000 {
		if len(model) == 0 || rng.IntN(3) > 0 {
			e := ts{rng.Int64N(500), uint64(i)}
			model = append(model, e)
			k := []byte{byte(e.t), byte(e.seq), byte(e.seq >> 8)}
			p.push(e.t, e.seq, 0, k, append(k, 'p'), false)
			continue
		}
		slices.SortFunc(model, func(a, b ts) int {
			if a.t != b.t {
				return int(a.t - b.t)
			}
			return int(a.seq) - int(b.seq)
		})
		want := model[0]
		model = model[1:]
		got := p.pop()
		k := p.key(&got)
		if got.time != want.t || got.seq != want.seq || k[0] != byte(want.t) || k[1] != byte(want.seq) || k[2] != byte(want.seq>>8) || string(p.payload(&got)) != string(k)+"p" {
			t.Fatalf("pop %d: got (%d, %d) key %v payload %q, want (%d, %d)", i, got.time, got.seq, k, p.payload(&got), want.t, want.seq)
		}
	}
	if p.len() != len(model) {
		t.Fatalf("%d entries left, want %d", p.len(), len(model))
	}
}

// BenchmarkPending_Release is the buffer as the keyed benchmark drives it:
// batches of 512 readings 1 ms apart with up to 50 ms of jitter pushed,
// then those 100 ms behind the latest released.
func BenchmarkPending_Release(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var p pending
	var ready []pendingEntry
	key := []byte("0123456789abcdefghsensor-000001")
	payload := make([]byte, 80)
	var maxT int64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		t := int64(i) + rng.Int64N(50)
		maxT = max(maxT, t)
		p.push(t, uint64(i), uint64(i), key, payload, false)
		if i%512 == 511 {
			for {
				if ready = p.popUpTo(maxT-100, ready[:0], 32); len(ready) == 0 {
					break
				}
			}
		}
	}
}
