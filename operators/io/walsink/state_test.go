package walsink

import (
	"slices"
	"testing"
)

// TestLogState_AbortedRanges: the aborted ranges stay sorted and merged
// whatever order Recover's ranges come in, and membership is their union.
func TestLogState_AbortedRanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ranges [][2]uint64
		want   []seqRange
	}{
		{"restarts while nothing commits", [][2]uint64{{5, 9}, {5, 12}, {5, 20}}, []seqRange{{5, 20}}},
		{"disjoint, in order", [][2]uint64{{1, 3}, {10, 12}}, []seqRange{{1, 3}, {10, 12}}},
		{"adjacent", [][2]uint64{{1, 3}, {4, 6}}, []seqRange{{1, 6}}},
		{"out of order (an older state record)", [][2]uint64{{10, 12}, {1, 3}, {2, 11}}, []seqRange{{1, 12}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newLogState()
			in := map[uint64]bool{}
			for _, r := range tc.ranges {
				st.addAborted(r[0], r[1])
				for s := r[0]; s <= r[1]; s++ {
					in[s] = true
				}
			}
			if !slices.Equal(st.aborted, tc.want) {
				t.Fatalf("ranges %v, want %v", st.aborted, tc.want)
			}
			for s := uint64(0); s <= 25; s++ {
				if st.isAborted(s) != in[s] {
					t.Errorf("isAborted(%d) = %v, want %v", s, st.isAborted(s), in[s])
				}
			}
		})
	}
}
