package state

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// roundTrip encodes v after a prefix (Append must only append) and decodes
// it back.
func roundTrip[T any](t *testing.T, c Codec[T], v T) (T, []byte) {
	t.Helper()
	b := c.Append([]byte("pre"), v)
	if !bytes.HasPrefix(b, []byte("pre")) {
		t.Fatalf("Append(%v) changed dst's prefix: %x", v, b)
	}
	got, err := c.Decode(b[3:])
	if err != nil {
		t.Fatalf("Decode(Append(%v)): %v", v, err)
	}
	return got, b[3:]
}

// The encodings are pinned byte for byte: they are the checkpoint format,
// read back on any architecture.
func TestCodecs_Golden(t *testing.T) {
	pair := PairCodec[string, int64]{First: StringCodec{}, Second: VarintCodec{}}
	tests := []struct {
		name string
		enc  func(t *testing.T) (string, []byte)
		want string
	}{
		{"int64", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[int64](t, Int64Codec{}, -2)
			return fmt.Sprint(v), b
		}, "feffffffffffffff"},
		{"uint64", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[uint64](t, Uint64Codec{}, 258)
			return fmt.Sprint(v), b
		}, "0201000000000000"},
		{"varint", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[int64](t, VarintCodec{}, -65)
			return fmt.Sprint(v), b
		}, "8101"},
		{"uvarint", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[uint64](t, UvarintCodec{}, 300)
			return fmt.Sprint(v), b
		}, "ac02"},
		{"float64", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[float64](t, Float64Codec{}, 1.5)
			return fmt.Sprint(v), b
		}, "000000000000f83f"},
		{"bool", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[bool](t, BoolCodec{}, true)
			return fmt.Sprint(v), b
		}, "01"},
		{"string", func(t *testing.T) (string, []byte) { v, b := roundTrip[string](t, StringCodec{}, "hé"); return v, b }, "68c3a9"},
		{"bytes", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[[]byte](t, BytesCodec{}, []byte{0, 1})
			return fmt.Sprint(v), b
		}, "0001"},
		{"pair", func(t *testing.T) (string, []byte) {
			v, b := roundTrip[Pair[string, int64]](t, pair, Pair[string, int64]{"ab", 1})
			return fmt.Sprint(v), b
		}, "02616202"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, b := tt.enc(t)
			if got := fmt.Sprintf("%x", b); got != tt.want {
				t.Fatalf("encoding %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCodecs_RoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64} {
		if got, _ := roundTrip[int64](t, Int64Codec{}, v); got != v {
			t.Errorf("int64 %d → %d", v, got)
		}
		if got, _ := roundTrip[int64](t, VarintCodec{}, v); got != v {
			t.Errorf("varint %d → %d", v, got)
		}
	}
	for _, v := range []float64{0, math.Copysign(0, -1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64} {
		if got, _ := roundTrip[float64](t, Float64Codec{}, v); math.Float64bits(got) != math.Float64bits(v) {
			t.Errorf("float64 %v → %v", v, got)
		}
	}
	// A first field of 128 bytes or more needs a longer length prefix.
	nested := PairCodec[string, Pair[bool, string]]{First: StringCodec{}, Second: PairCodec[bool, string]{First: BoolCodec{}, Second: StringCodec{}}}
	for _, n := range []int{0, 127, 128, 20000} {
		v := Pair[string, Pair[bool, string]]{strings.Repeat("a", n), Pair[bool, string]{true, "z"}}
		if got, _ := roundTrip(t, nested, v); got != v {
			t.Errorf("pair of %d bytes: got %d bytes %v", n, len(got.First), got.Second)
		}
	}
	// BytesCodec.Decode copies: the source may be reused.
	src := []byte{1, 2}
	got, _ := BytesCodec{}.Decode(src)
	src[0] = 9
	if got[0] != 1 {
		t.Fatal("BytesCodec.Decode aliases its input")
	}
}

func TestCodecs_Malformed(t *testing.T) {
	bad := []struct {
		name string
		err  error
	}{
		{"int64 short", func() error { _, err := Int64Codec{}.Decode([]byte{1}); return err }()},
		{"uint64 long", func() error { _, err := Uint64Codec{}.Decode(make([]byte, 9)); return err }()},
		{"float64 empty", func() error { _, err := Float64Codec{}.Decode(nil); return err }()},
		{"varint trailing", func() error { _, err := VarintCodec{}.Decode([]byte{1, 1}); return err }()},
		{"uvarint truncated", func() error { _, err := UvarintCodec{}.Decode([]byte{0x80}); return err }()},
		{"bool 2", func() error { _, err := BoolCodec{}.Decode([]byte{2}); return err }()},
		{"pair length", func() error {
			_, err := PairCodec[string, string]{StringCodec{}, StringCodec{}}.Decode([]byte{5, 'a'})
			return err
		}()},
	}
	for _, b := range bad {
		if b.err == nil {
			t.Errorf("%s: no error", b.name)
		}
	}
}

func FuzzPairCodec(f *testing.F) {
	c := PairCodec[[]byte, int64]{First: BytesCodec{}, Second: VarintCodec{}}
	f.Add([]byte{0x02, 'a', 'b', 0x02})
	f.Add([]byte{0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := c.Decode(b)
		if err != nil {
			return
		}
		if got := c.Append(nil, v); !bytes.Equal(got, b) {
			// Varint encodings are not unique (overlong forms), so only
			// check that the re-encoding decodes to the same value.
			w, err := c.Decode(got)
			if err != nil || !bytes.Equal(w.First, v.First) || w.Second != v.Second {
				t.Fatalf("%x → %v → %x → %v, %v", b, v, got, w, err)
			}
		}
	})
}
