package watermark

import (
	"errors"
	"testing"
)

func TestBoundedOutOfOrder(t *testing.T) {
	tests := []struct {
		name  string
		bound int64
		in    []int64
		want  []int64 // watermark after each Observe
	}{
		// Flink's BoundedOutOfOrdernessWatermarks: watermark = max event time seen − bound − 1, never back.
		{"bound 2s", 2000, []int64{1000, 5000, 3000, 7000}, []int64{-1001, 2999, 2999, 4999}},
		{"monotonous is bound 0", 0, []int64{10, 20, 15}, []int64{9, 19, 19}},
		{"negative timestamps", 100, []int64{-500, -200}, []int64{-601, -301}},
		{"underflow clamps to Min", 10, []int64{Min + 3}, []int64{Min}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewBoundedOutOfOrder(tt.bound)
			if err != nil {
				t.Fatal(err)
			}
			if g.Current() != Min {
				t.Fatalf("before any reading: %d, want Min", g.Current())
			}
			for i, ts := range tt.in {
				if got := g.Observe(ts); got != tt.want[i] {
					t.Fatalf("after %d: %d, want %d", ts, got, tt.want[i])
				}
			}
		})
	}
	if _, err := NewBoundedOutOfOrder(-1); !errors.Is(err, ErrNegativeBound) {
		t.Fatalf("negative bound: %v", err)
	}
	if got := NewMonotonous().Observe(5); got != 4 {
		t.Fatalf("monotonous: %d, want 4", got)
	}
}

func TestTooFarInFuture(t *testing.T) {
	tests := []struct {
		ts, now, skew int64
		want          bool
	}{
		{61_000, 0, 60_000, true},
		{60_000, 0, 60_000, false}, // exactly at the limit is accepted
		{-5, 0, 60_000, false},
		{1 << 62, 0, 0, false}, // disabled
		{Max, Max - 1, 10, false},
	}
	for _, tt := range tests {
		if got := TooFarInFuture(tt.ts, tt.now, tt.skew); got != tt.want {
			t.Errorf("TooFarInFuture(%d, %d, %d) = %v, want %v", tt.ts, tt.now, tt.skew, got, tt.want)
		}
	}
}

// step is one input to a Combiner: input ≥ 0 speaks with watermark wm, input
// −1 is a Tick; want is the combined watermark afterwards.
type step struct {
	input   int
	wm, now int64
	want    int64
}

func TestCombiner(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		idleMs int64
		steps  []step
	}{
		{"min over inputs", 2, 0, []step{
			{0, 100, 0, Min}, {1, 50, 0, 50}, {1, 200, 0, 100}, {0, 300, 0, 200},
		}},
		{"never goes back on a regressing input", 2, 0, []step{
			{0, 100, 0, Min}, {1, 100, 0, 100}, {0, 50, 0, 100},
		}},
		// Flink's WatermarksWithIdleness: an input idle for idle_timeout is left out until it speaks again.
		{"idle input releases the watermark", 2, 1000, []step{
			{0, 100, 0, Min}, {1, 50, 0, 50}, {0, 500, 900, 50},
			{-1, 0, 999, 50}, {-1, 0, 1000, 500}, // input 1 silent since 0: idle at 1000
			{0, 800, 1100, 800},
		}},
		{"rejoining input is held at the combined value", 2, 1000, []step{
			{0, 100, 0, Min}, {1, 50, 0, 50}, {0, 500, 1000, 500},
			{1, 60, 1200, 500},  // rejoins behind: output does not go back
			{0, 900, 1300, 500}, // and it holds progress until it passes 500
			{1, 700, 1400, 700},
		}},
		{"all idle: no advance", 2, 1000, []step{
			{0, 100, 0, Min}, {1, 200, 0, 100}, {-1, 0, 5000, 100},
		}},
		{"never-speaking input goes idle after the timeout", 2, 1000, []step{
			{0, 100, 500, Min}, {-1, 0, 1000, 100},
		}},
		{"idleness off: a silent input holds forever", 2, 0, []step{
			{0, 100, 0, Min}, {-1, 0, 1 << 40, Min},
		}},
		{"end of input from all inputs flushes", 2, 0, []step{
			{0, Max, 0, Min}, {1, Max, 0, Max},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCombiner(tt.n, tt.idleMs, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				var got int64
				if s.input < 0 {
					got = c.Tick(s.now)
				} else {
					got = c.Update(s.input, s.wm, s.now)
				}
				if got != s.want || c.Current() != s.want {
					t.Fatalf("step %d %+v: combined %d, want %d", i, s, got, s.want)
				}
			}
		})
	}
	if _, err := NewCombiner(0, 0, 0); !errors.Is(err, ErrBadCombiner) {
		t.Fatalf("zero inputs: %v", err)
	}
}
