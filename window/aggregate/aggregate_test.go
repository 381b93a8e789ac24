package aggregate

import (
	"math"
	"testing"
)

type reading struct {
	v float64
	t int64
}

var nan = math.NaN()

func fold(f Func, rs []reading, countNulls bool) Acc {
	var a Acc
	for _, r := range rs {
		a.Add(f, r.v, r.t, countNulls)
	}
	return a
}

func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

func TestAcc_Result(t *testing.T) {
	rs := []reading{{4, 10}, {nan, 5}, {2, 20}, {7, 3}, {2, 3}, {5, 20}}
	// Non-null values 4 2 7 2 5: n=5, sum=20, mean=4, squared deviations 0+4+9+4+1=18.
	tests := []struct {
		name       string
		f          Func
		countNulls bool
		in         []reading
		want       float64
	}{
		{"count readings counts nulls", Count, true, rs, 6},
		{"count values skips nulls", Count, false, rs, 5},
		{"sum", Sum, false, rs, 20},
		{"min", Min, false, rs, 2},
		{"max", Max, false, rs, 7},
		{"avg", Avg, false, rs, 4},
		{"first: earliest time, tie keeps earliest arrival", First, false, rs, 7},
		{"last: latest time, tie keeps latest arrival", Last, false, rs, 5},
		{"variance (population)", Variance, false, rs, 18.0 / 5},
		{"stddev (population)", Stddev, false, rs, math.Sqrt(18.0 / 5)},
		{"median is the lower median", Median, false, rs, 4},
		{"empty count is 0", Count, true, nil, 0},
		{"empty sum is null", Sum, false, nil, nan},
		{"empty avg is null", Avg, false, []reading{{nan, 1}}, nan},
		{"empty min is null", Min, false, nil, nan},
		{"empty max is null", Max, false, nil, nan},
		{"empty first is null", First, false, nil, nan},
		{"empty stddev is null", Stddev, false, nil, nan},
		{"empty median is null", Median, false, []reading{{nan, 1}}, nan},
		{"single value variance is 0", Variance, false, []reading{{3, 1}}, 0},
		{"negative min", Min, false, []reading{{-1, 1}, {-5, 2}}, -5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fold(tt.f, tt.in, tt.countNulls)
			got := a.Result(tt.f, 0)
			if tt.f == Median && !math.IsNaN(tt.want) {
				if math.Abs(got-tt.want) > RelativeAccuracy*math.Abs(tt.want) {
					t.Fatalf("got %v, want %v ±1%%", got, tt.want)
				}
				return
			}
			if !sameFloat(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// Value is ±Inf for a result that overflowed float64, also when the
// overflow lost its sign (NaN), and NaN only when no value was seen.
func TestAcc_ValueOverflow(t *testing.T) {
	const big = 1.797e308
	inf := math.Inf(1)
	tests := []struct {
		name string
		f    Func
		in   []reading
		want float64
	}{
		{"sum overflows", Sum, []reading{{big, 1}, {big, 2}}, inf},
		{"negative sum overflows", Sum, []reading{{-big, 1}, {-big, 2}}, math.Inf(-1)},
		{"avg of an overflowed sum", Avg, []reading{{big, 1}, {big, 2}}, inf},
		{"variance overflows", Variance, []reading{{big, 1}, {-big, 2}}, inf},
		{"stddev overflows", Stddev, []reading{{big, 1}, {-big, 2}}, inf},
		{"max stays finite", Max, []reading{{big, 1}, {big, 2}}, big},
		{"finite sum", Sum, []reading{{big, 1}, {-big, 2}}, 0},
		{"empty sum is null", Sum, nil, nan},
		{"empty avg is null", Avg, []reading{{nan, 1}}, nan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fold(tt.f, tt.in, false)
			got := a.Value(tt.f, 0)
			switch {
			case math.IsInf(tt.want, 0) && (tt.f == Variance || tt.f == Stddev):
				// The sign of an overflowed variance means nothing.
				if !math.IsInf(got, 0) {
					t.Fatalf("got %v, want ±Inf", got)
				}
			case got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)):
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// Merging the accumulators of two halves equals folding the whole input, as
// session window merges require.
func TestAcc_Merge(t *testing.T) {
	rs := []reading{{4, 10}, {nan, 5}, {2, 20}, {7, 3}, {1.5, 30}, {5, 21}, {-3, 2}}
	for f := Count; f < numFuncs; f++ {
		for split := 0; split <= len(rs); split++ {
			whole := fold(f, rs, true)
			a, b := fold(f, rs[:split], true), fold(f, rs[split:], true)
			a.Merge(f, &b)
			if got, want := a.Result(f, 0.9), whole.Result(f, 0.9); !sameFloat(got, want) {
				t.Errorf("%v split %d: merged %v, whole %v", f, split, got, want)
			}
			if a.N != whole.N {
				t.Errorf("%v split %d: merged N %d, whole %d", f, split, a.N, whole.N)
			}
		}
	}
}

func TestAcc_CopyFrom(t *testing.T) {
	a := fold(Median, []reading{{1, 1}, {2, 2}, {3, 3}}, false)
	var b Acc
	b.CopyFrom(&a)
	a.Add(Median, 100, 4, false)
	a.Add(Median, 100, 5, false)
	if got := b.Result(Median, 0); math.Abs(got-2) > 0.02 {
		t.Fatalf("copy changed with the original: median %v", got)
	}
}

func TestParseFunc(t *testing.T) {
	for f := Count; f < numFuncs; f++ {
		got, err := ParseFunc(f.String())
		if err != nil || got != f {
			t.Fatalf("ParseFunc(%q) = %v, %v", f.String(), got, err)
		}
	}
	if _, err := ParseFunc("mode"); err == nil {
		t.Fatal("ParseFunc(mode) succeeded")
	}
}

func TestAcc_AddAllocs(t *testing.T) {
	var accs [5]Acc
	funcs := [5]Func{Count, Sum, Avg, Min, Stddev}
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range accs {
			accs[i].Add(funcs[i], 1.5, 7, true)
		}
	})
	if allocs != 0 {
		t.Fatalf("Add allocates %v times", allocs)
	}
}
