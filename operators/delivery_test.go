package operators

import (
	"slices"
	"strconv"
	"sync"
	"testing"
)

// TestDelivery_ItemsFromSeveralSinks: a pipeline hands the same Delivery to
// each of its sinks, whose goroutines call Items at once; every one gets
// every item once, in order (before Items was made safe for that, two sinks
// building the items together produced duplicates in an exactly-once file
// sink's output, and the race detector flags it).
func TestDelivery_ItemsFromSeveralSinks(t *testing.T) {
	d := &Delivery{}
	var want []string
	for i := range 1000 {
		p := `{"n":` + strconv.Itoa(i) + `}`
		d.AddRaw([]byte(p))
		want = append(want, p)
	}
	var wg sync.WaitGroup
	got := make([][]string, 4)
	for s := range got {
		wg.Go(func() {
			for _, it := range d.Items() {
				got[s] = append(got[s], string(it.Payload))
			}
		})
	}
	wg.Wait()
	for s := range got {
		if !slices.Equal(got[s], want) {
			t.Fatalf("sink %d got %d items, want the %d added, in order", s, len(got[s]), len(want))
		}
	}
}
