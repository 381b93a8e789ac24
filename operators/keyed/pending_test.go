package keyed

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
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

// TestPending_RunsMatchSortedOrder pushes readings with the disorder of
// each case and releases them with popUpTo at a watermark trailing the
// latest time (some pops with pop), memory running short now and then
// (dropPayloads) and the arena compacting as it grows: the entries come out
// exactly in the order of a sort by (time, seq), keys and payloads intact,
// whether they sat in a run or in the heap; after every push and release
// each run is in order and its recorded head and tail are its own.
func TestPending_RunsMatchSortedOrder(t *testing.T) {
	cases := []struct {
		name string
		time func(rng *rand.Rand, i int) int64
	}{
		{"in order", func(_ *rand.Rand, i int) int64 { return int64(i) }},
		{"equal times", func(_ *rand.Rand, i int) int64 { return int64(i / 64) }},
		{"jitter within the runs", func(rng *rand.Rand, i int) int64 { return int64(i) + rng.Int64N(8) }},
		{"jitter beyond the runs", func(rng *rand.Rand, i int) int64 { return int64(i) + rng.Int64N(200) }},
		{"rare stragglers", func(rng *rand.Rand, i int) int64 {
			if rng.IntN(50) == 0 {
				return int64(i) - rng.Int64N(300)
			}
			return int64(i)
		}},
		{"reverse", func(_ *rand.Rand, i int) int64 { return int64(-i) }},
		{"random", func(rng *rand.Rand, _ int) int64 { return rng.Int64N(1000) }},
	}
	type ts struct {
		t   int64
		seq uint64
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			var p pending
			var model []ts // pushed and not yet released
			var want, got []ts
			var ready []pendingEntry
			check := func(e *pendingEntry) {
				k := p.key(e)
				if len(k) != 9 || int64(binary.BigEndian.Uint64(k)) != e.time || k[8] != byte(e.seq) {
					t.Fatalf("entry (%d, %d): key %v", e.time, e.seq, k)
				}
				if pl := p.payload(e); pl != nil && string(pl) != string(k)+"p" {
					t.Fatalf("entry (%d, %d): payload %q", e.time, e.seq, pl)
				}
				got = append(got, ts{e.time, e.seq})
				if err := p.checkRuns(); err != "" {
					t.Fatalf("after releasing (%d, %d): %s", e.time, e.seq, err)
				}
			}
			release := func(wm int64, all bool) {
				slices.SortFunc(model, func(a, b ts) int {
					if a.t != b.t {
						return cmp.Compare(a.t, b.t)
					}
					return cmp.Compare(a.seq, b.seq)
				})
				n := 0
				for n < len(model) && (all || model[n].t <= wm) {
					n++
				}
				want = append(want, model[:n]...)
				model = slices.Delete(model, 0, n)
				if all {
					for p.len() > 0 {
						e := p.pop()
						check(&e)
					}
					return
				}
				for {
					if ready = p.popUpTo(wm, ready[:0], 1+rng.IntN(40)); len(ready) == 0 {
						break
					}
					for i := range ready {
						check(&ready[i])
					}
				}
			}
			maxT := int64(math.MinInt64)
			for i := range 30000 {
				tm := c.time(rng, i)
				maxT = max(maxT, tm)
				k := binary.BigEndian.AppendUint64(nil, uint64(tm))
				k = append(k, byte(i))
				stored := rng.IntN(4) == 0
				payload := append(slices.Clip(k), 'p')
				if stored && rng.IntN(2) == 0 {
					payload = nil // read back from the backend
				}
				p.push(tm, uint64(i), uint64(i), k, payload, stored)
				model = append(model, ts{tm, uint64(i)})
				switch {
				case rng.IntN(2000) == 0:
					p.dropPayloads()
				case rng.IntN(3000) == 0:
					release(0, true)
				case rng.IntN(100) == 0:
					release(maxT-rng.Int64N(300), false)
				}
				if p.len() != len(model) {
					t.Fatalf("after push %d: len %d, want %d", i, p.len(), len(model))
				}
				if err := p.checkRuns(); err != "" {
					t.Fatalf("after push %d: %s", i, err)
				}
			}
			release(0, true)
			if !slices.Equal(got, want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Fatalf("release %d: got (%d, %d), want (%d, %d)", i, got[i].t, got[i].seq, want[i].t, want[i].seq)
					}
				}
				t.Fatalf("released %d entries, want %d", len(got), len(want))
			}
		})
	}
}

// checkRuns returns what is wrong with p's runs: a run out of order, a head
// or tail that is not its run's, the tails not largest first with the
// empty runs last.
func (p *pending) checkRuns() string {
	seen := 0
	for j := range p.tails {
		i := int(p.runOf[j])
		seen |= 1 << i
		r := &p.runs[i]
		live := r.e[r.head:]
		head, tail := noEntry, minEntry
		if len(live) > 0 {
			head = pendingOrder{live[0].time, live[0].seq}
			tail = pendingOrder{live[len(live)-1].time, live[len(live)-1].seq}
		}
		if p.heads[i] != head || p.tails[j] != tail {
			return fmt.Sprintf("run %d: head %v tail %v, recorded %v %v", i, head, tail, p.heads[i], p.tails[j])
		}
		if j > 0 && p.tails[j-1].less(tail) {
			return fmt.Sprintf("tails out of order at %d: %v before %v", j, p.tails[j-1], tail)
		}
		for k := 1; k < len(live); k++ {
			if live[k].less(&live[k-1]) {
				return fmt.Sprintf("run %d out of order at %d", i, k)
			}
		}
	}
	if seen != 1<<pendingRuns-1 {
		return fmt.Sprintf("runOf %v is not a permutation", p.runOf)
	}
	return ""
}
