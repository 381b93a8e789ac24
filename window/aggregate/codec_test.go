package aggregate

import (
	"errors"
	"math"
	"testing"
)

func allFuncs() []Func {
	var fs []Func
	for f := Count; f < numFuncs; f++ {
		fs = append(fs, f)
	}
	return fs
}

func TestAppendAccs_RoundTrip(t *testing.T) {
	fs := allFuncs()
	for _, in := range [][]reading{nil, {{nan, 1}}, {{1.5, 3}, {-2, 1}, {0, 9}, {1e6, 4}}} {
		accs := make([]Acc, len(fs))
		for i, f := range fs {
			accs[i] = fold(f, in, true)
		}
		enc := AppendAccs(nil, fs, accs)
		got := make([]Acc, len(fs))
		rest, err := DecodeAccs(append(enc, 0xAA), fs, got)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(rest) != 1 || rest[0] != 0xAA {
			t.Fatalf("rest %x, want aa", rest)
		}
		for i, f := range fs {
			if g, w := got[i].Result(f, 0.75), accs[i].Result(f, 0.75); !sameFloat(g, w) || got[i].N != accs[i].N {
				t.Errorf("%v: decoded %v (n=%d), want %v (n=%d)", f, g, got[i].N, w, accs[i].N)
			}
		}
	}
}

// The encoding is fixed: this pins the bytes so a change is a deliberate
// format version bump, and shows it does not depend on the architecture.
func TestAppendAcc_Golden(t *testing.T) {
	a := Acc{N: 2, A: 1.5, T: -3}
	got := AppendAcc(nil, First, &a)
	want := []byte{byte(First), 2, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 5}
	if string(got) != string(want) {
		t.Fatalf("got % x, want % x", got, want)
	}
}

func TestDecodeAccs_Corrupt(t *testing.T) {
	fs := []Func{Count, Percentile}
	accs := []Acc{fold(Count, []reading{{1, 1}}, true), fold(Percentile, []reading{{1, 1}, {5, 2}}, false)}
	enc := AppendAccs(nil, fs, accs)
	cases := map[string][]byte{
		"empty":         nil,
		"bad version":   append([]byte{9}, enc[1:]...),
		"wrong func":    func() []byte { b := append([]byte(nil), enc...); b[2] = byte(Sum); return b }(),
		"wrong count":   func() []byte { b := append([]byte(nil), enc...); b[1] = 3; return b }(),
		"truncated":     enc[:len(enc)-1],
		"huge store":    append(append([]byte(nil), enc[:6]...), 0x00, 0xff, 0xff, 0xff, 0x0f),
		"only version":  enc[:1],
		"float missing": AppendAcc([]byte{1, 1}, Sum, &Acc{N: 1, A: 2})[:5],
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			out := make([]Acc, len(fs))
			if _, err := DecodeAccs(b, fs, out); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func FuzzDecodeAccs(f *testing.F) {
	fs := allFuncs()
	accs := make([]Acc, len(fs))
	for i, fn := range fs {
		accs[i] = fold(fn, []reading{{1, 1}, {math.Pi, 2}, {-7, 0}}, true)
	}
	f.Add(AppendAccs(nil, fs, accs))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		out := make([]Acc, len(fs))
		if _, err := DecodeAccs(b, fs, out); err != nil {
			return
		}
		for i, fn := range fs {
			_ = out[i].Result(fn, 0.5) // must not panic on decoded data
		}
	})
}
