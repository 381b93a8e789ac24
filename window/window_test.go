package window

import (
	"math"
	"slices"
	"testing"
)

func TestStartOf(t *testing.T) {
	tests := []struct {
		t, off, size, want int64
	}{
		{0, 0, 5000, 0},
		{4999, 0, 5000, 0},
		{5000, 0, 5000, 5000},
		{-1, 0, 5000, -5000}, // floor modulo, not Go's %
		{-5000, 0, 5000, -5000},
		{-5001, 0, 5000, -10000},
		{500, 1000, 5000, -4000},
		{1000, 1000, 5000, 1000},
		{-100, 500, 1000, -500},
		{7, -3, 5, 7},
		// Negative offsets: Flink's days at midnight in UTC+8 (size 24 h,
		// offset −8 h) start at 16:00 UTC.
		{0, -8 * hour, 24 * hour, -8 * hour},
		{16*hour - 1, -8 * hour, 24 * hour, -8 * hour},
		{16 * hour, -8 * hour, 24 * hour, 16 * hour},
		{-8*hour - 1, -8 * hour, 24 * hour, -32 * hour},
		{-1, -300, 1000, -300},
		{-400, -300, 1000, -1300}, // (−100) floor-mod 1000 = 900
		{700, -300, 1000, 700},
		{-999, -999, 1000, -999},
	}
	for _, tt := range tests {
		if got := StartOf(tt.t, tt.off, tt.size); got != tt.want {
			t.Errorf("StartOf(%d, %d, %d) = %d, want %d", tt.t, tt.off, tt.size, got, tt.want)
		}
	}
}

const hour = int64(3_600_000)

// Offsets o and o + size give the same windows (Flink documents offsets in
// (−size, size); the floor modulo makes them agree).
func TestStartOf_OffsetAndOffsetPlusSize(t *testing.T) {
	for _, c := range []struct{ off, size int64 }{{-8 * hour, 24 * hour}, {-300, 1000}, {-1, 7}, {-6, 7}} {
		for ts := -3 * c.size; ts <= 3*c.size; ts += c.size/7 + 1 {
			if a, b := StartOf(ts, c.off, c.size), StartOf(ts, c.off+c.size, c.size); a != b {
				t.Errorf("StartOf(%d, %d, %d) = %d, with offset %d: %d", ts, c.off, c.size, a, c.off+c.size, b)
			}
		}
	}
}

func TestWindow_Intersects(t *testing.T) {
	tests := []struct {
		a, b Window
		want bool
	}{
		{Window{0, 5}, Window{5, 9}, true}, // touching merges (sessions)
		{Window{0, 5}, Window{6, 9}, false},
		{Window{0, 10}, Window{2, 3}, true},
		{Window{6, 9}, Window{0, 5}, false},
	}
	for _, tt := range tests {
		if got := tt.a.Intersects(tt.b); got != tt.want {
			t.Errorf("%v.Intersects(%v) = %v", tt.a, tt.b, got)
		}
	}
	if GlobalWindow.String() != "[min,max)" || (Window{1, 2}).MaxTimestamp() != 1 {
		t.Fatal("String/MaxTimestamp")
	}
}

// Sliding and count windows come latest start first, as Flink's
// SlidingEventTimeWindows.assignWindows lists them.
func TestAssigner_AssignWindows(t *testing.T) {
	tests := []struct {
		name string
		a    Assigner
		t    int64
		want []Window
	}{
		{"tumbling", Tumbling(1000, 0, true), 1500, []Window{{1000, 2000}}},
		{"tumbling negative", Tumbling(1000, 0, true), -1, []Window{{-1000, 0}}},
		{"sliding overlaps", Sliding(3000, 1000, 0, true), 2500, []Window{{2000, 5000}, {1000, 4000}, {0, 3000}}},
		{"sliding non-divisible", Sliding(2500, 1000, 0, true), 2600, []Window{{2000, 4500}, {1000, 3500}}},
		{"sliding gap", Sliding(1000, 2000, 0, true), 1500, nil},
		{"sliding edge of gap", Sliding(1000, 2000, 0, true), 999, []Window{{0, 1000}}},
		{"sliding with offset", Sliding(3000, 1000, 500, true), -100, []Window{{-500, 2500}, {-1500, 1500}, {-2500, 500}}},
		{"sliding with negative offset", Sliding(3000, 1000, -300, true), -400, []Window{{-1300, 1700}, {-2300, 700}, {-3300, -300}}},
		{"tumbling with negative offset", Tumbling(24*hour, -8*hour, true), 0, []Window{{-8 * hour, 16 * hour}}},
		{"session", Session(30, true), 7, []Window{{7, 37}}},
		{"count tumbling", CountTumbling(3), 4, []Window{{3, 6}}},
		{"count sliding start", CountSliding(4, 2), 0, []Window{{0, 4}, {-2, 2}}},
		{"global", Global(), 123, []Window{GlobalWindow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.AssignWindows(tt.t, nil); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	buf := make([]Window, 0, 8)
	a := Sliding(60_000, 10_000, 0, true)
	if allocs := testing.AllocsPerRun(100, func() { buf = a.AssignWindows(65_000, buf[:0]) }); allocs != 0 {
		t.Fatalf("AssignWindows allocates %v times", allocs)
	}
}

func TestAddSat(t *testing.T) {
	if addSat(math.MaxInt64-1, 5) != math.MaxInt64 || addSat(1, 2) != 3 {
		t.Fatal("addSat")
	}
}
