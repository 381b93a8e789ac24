package aggregate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactLower is the reference quantile of the Sketch guarantee: the element of
// rank ⌊q·(n−1)⌋.
func exactLower(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}

func TestSketch_RelativeError(t *testing.T) {
	seed := uint64(20261129)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	dists := []struct {
		name string
		gen  func() float64
	}{
		{"uniform 0..100", func() float64 { return r.Float64() * 100 }},
		{"lognormal", func() float64 { return math.Exp(r.NormFloat64() * 3) }},
		{"normal around 0", func() float64 { return r.NormFloat64() * 10 }},
		{"temperatures with zeros", func() float64 { return math.Round(r.NormFloat64()*5) / 2 }},
		{"constant", func() float64 { return 21.5 }},
	}
	qs := []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			for _, n := range []int{1, 2, 3, 10, 1000, 20000} {
				s := NewSketch()
				vals := make([]float64, n)
				for i := range vals {
					vals[i] = d.gen()
					s.Add(vals[i])
				}
				slices.Sort(vals)
				for _, q := range qs {
					want := exactLower(vals, q)
					got := s.Quantile(q)
					if math.Abs(got-want) > RelativeAccuracy*math.Abs(want)*(1+1e-12) {
						t.Fatalf("n=%d q=%v: got %v, want %v ±%v%%", n, q, got, want, RelativeAccuracy*100)
					}
				}
			}
		})
	}
}

func TestSketch_BucketCap(t *testing.T) {
	s := NewSketch()
	// Magnitudes from 1e-300 to 1e300 would need ~68k buckets.
	for e := -300; e <= 300; e++ {
		s.Add(math.Pow(10, float64(e)))
		s.Add(-math.Pow(10, float64(e)))
	}
	if len(s.pos.counts) > MaxBuckets || len(s.neg.counts) > MaxBuckets {
		t.Fatalf("buckets %d/%d exceed cap %d", len(s.pos.counts), len(s.neg.counts), MaxBuckets)
	}
	if s.Count() != 2*601 {
		t.Fatalf("count %d after collapse, want %d", s.Count(), 2*601)
	}
	// The largest magnitudes keep the guarantee.
	if got, want := s.Quantile(1), 1e300; math.Abs(got-want) > RelativeAccuracy*want {
		t.Fatalf("max %v, want %v", got, want)
	}
	if got, want := s.Quantile(0), -1e300; math.Abs(got-want) > -RelativeAccuracy*want {
		t.Fatalf("min %v, want %v", got, want)
	}
}

func TestSketch_MergeEqualsUnion(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	a, b, all := NewSketch(), NewSketch(), NewSketch()
	for i := range 5000 {
		v := math.Exp(r.NormFloat64()*2) * float64(1-2*(i%3/2))
		all.Add(v)
		if i%2 == 0 {
			a.Add(v)
		} else {
			b.Add(v)
		}
	}
	a.Merge(b)
	for _, q := range []float64{0, 0.3, 0.5, 0.99, 1} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Fatalf("q=%v: merged %v, union %v", q, a.Quantile(q), all.Quantile(q))
		}
	}
}

func TestSketch_AddAllocsAfterWarmup(t *testing.T) {
	s := NewSketch()
	for i := 1; i <= 100; i++ {
		s.Add(float64(i))
	}
	allocs := testing.AllocsPerRun(1000, func() { s.Add(42) })
	if allocs != 0 {
		t.Fatalf("Add allocates %v times", allocs)
	}
}

func BenchmarkSketch_Add(b *testing.B) {
	s := NewSketch()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Add(float64(i%1000) + 0.5)
	}
}
