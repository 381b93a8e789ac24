package stages

import (
	"math"
	"testing"

	"github.com/eddy-edge/eddy/checkpoint"
)

// TestInFlightBatch_Control checks that in-flight records replayed after
// a restore keep the control values captured for them (a record stored
// without any gets none), and that a batch of records without any
// carries none at all.
func TestInFlightBatch_Control(t *testing.T) {
	for _, c := range []struct {
		name        string
		controls    [][]byte
		withControl bool
		want        []string
	}{
		{"captured", [][]byte{[]byte("c1"), []byte("c2")}, true, []string{"c1", "c2"}},
		{"one stored without", [][]byte{nil, []byte("c2")}, true, []string{"", "c2"}},
		{"none", [][]byte{nil, nil}, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var recs []checkpoint.InFlightRecord
			for i, ctl := range c.controls {
				recs = append(recs, checkpoint.InFlightRecord{Seq: uint64(i), Key: []byte("k"), Time: int64(i), Watermark: math.MinInt64, Payload: []byte("p"), Control: ctl})
			}
			b := inFlightBatch(recs, 0, c.withControl, false)
			defer b.Release()
			if b.Len() != len(recs) {
				t.Fatalf("%d records, want %d", b.Len(), len(recs))
			}
			for i := range recs {
				got := b.Control(i)
				if c.want == nil {
					if got != nil {
						t.Fatalf("record %d: control %q, want none", i, got)
					}
					continue
				}
				if string(got) != c.want[i] || string(b.Payload(i)) != "p" {
					t.Fatalf("record %d: control %q payload %q, want %q, p", i, got, b.Payload(i), c.want[i])
				}
			}
		})
	}
}
