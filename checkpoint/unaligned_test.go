package checkpoint

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestAlignmentPolicy_Overtake(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          AlignmentPolicy
		announces  bool
		at, now    int64
		wantSwitch bool
	}{
		{"aligned never overtakes", AlignmentPolicy{}, false, 0, 1 << 40, false},
		{"unaligned overtakes at once", AlignmentPolicy{Unaligned: true}, true, 100, 100, true},
		{"timeout not reached", AlignmentPolicy{AlignedTimeoutMs: 2000}, true, 100, 2099, false},
		{"timeout reached", AlignmentPolicy{AlignedTimeoutMs: 2000}, true, 100, 2100, true},
		{"unaligned wins over a timeout", AlignmentPolicy{Unaligned: true, AlignedTimeoutMs: 2000}, true, 100, 101, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Announces(); got != tc.announces {
				t.Errorf("Announces() = %v, want %v", got, tc.announces)
			}
			if got := tc.p.Overtake(tc.at, tc.now); got != tc.wantSwitch {
				t.Errorf("Overtake(%d, %d) = %v, want %v", tc.at, tc.now, got, tc.wantSwitch)
			}
		})
	}
}

func TestInFlight_RoundTrip(t *testing.T) {
	for _, r := range []InFlightRecord{
		{Seq: 7, KeyGroup: 127, Key: []byte("dev-1\x00"), Time: -5, Watermark: math.MinInt64, Offset: 1 << 40,
			Values: []float64{1.5, math.NaN(), -0}, Payload: []byte(`{"device":"dev-1"}`)},
		{Seq: 0}, // empty key and payload decode as nil
		// Captured control values.
		{Seq: 8, Key: []byte("k"), Watermark: 3, Arrival: 1_700_000_000_123, Payload: []byte(`{}`), Control: []byte{1, 1, 5, 'l', 'i', 'm', 'i', 't', 1, 0, 0, 0, 0, 0, 0, 0x49, 0x40}},
	} {
		b := AppendInFlight(nil, &r)
		if b[0] != InFlightVersion {
			t.Fatalf("version %d, want %d", b[0], InFlightVersion)
		}
		got, err := DecodeInFlight(b)
		if err != nil {
			t.Fatal(err)
		}
		// NaN != NaN: compare the values' bits, then the rest.
		if len(got.Values) != len(r.Values) {
			t.Fatalf("%d values, want %d", len(got.Values), len(r.Values))
		}
		for i := range r.Values {
			if math.Float64bits(got.Values[i]) != math.Float64bits(r.Values[i]) {
				t.Fatalf("value %d: %v, want %v", i, got.Values[i], r.Values[i])
			}
		}
		got.Values, r.Values = nil, nil
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
		// Every truncation and a wrong version are refused as corrupt.
		for n := 0; n < len(b); n++ {
			if _, err := DecodeInFlight(b[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d bytes: err %v, want ErrCorrupt", n, err)
			}
		}
		for _, v := range []byte{InFlightVersion - 1, InFlightVersion + 1} {
			bad := append([]byte{v}, b[1:]...)
			if _, err := DecodeInFlight(bad); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("version %d: err %v, want ErrCorrupt", v, err)
			}
		}
	}
}

func TestSortInFlight_ByWatermarkThenSeq(t *testing.T) {
	rs := []InFlightRecord{
		{Seq: 3, Watermark: 20}, {Seq: 1, Watermark: 10}, {Seq: 0, Watermark: 20}, {Seq: 2, Watermark: 10}, {Seq: 9, Watermark: 5},
	}
	SortInFlight(rs)
	var got []uint64
	for _, r := range rs {
		got = append(got, r.Seq)
	}
	if want := []uint64{9, 1, 2, 0, 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
