package state

import (
	"fmt"
	"slices"
	"testing"
)

// writeOperatorState returns a checkpoint of parallelism old in which
// subtask i holds the elements 100*i … 100*i+n_i-1.
func writeOperatorState(t *testing.T, old int, sizes []int, mode Redistribution) *chain {
	t.Helper()
	var c chain
	for i := range old {
		be := NewMemory()
		s, err := NewOperatorListState(be, "src", "pos", Int64Codec{}, OperatorListOptions{Subtask: i, Parallelism: old, Redistribution: mode})
		if err != nil {
			t.Fatal(err)
		}
		for j := range sizes[i] {
			if err := s.Add(int64(100*i + j)); err != nil {
				t.Fatal(err)
			}
		}
		var part chain
		part.take(t, be, true).Close()
		c.entries = append(c.entries, part.entries...)
	}
	return &c
}

func restoreOperatorState(t *testing.T, c *chain, i, parallelism int, mode Redistribution) []int64 {
	t.Helper()
	be := openTestBolt(t, BoltOptions{})
	s, err := NewOperatorListState(be, "src", "pos", Int64Codec{}, OperatorListOptions{Subtask: i, Parallelism: parallelism, Redistribution: mode})
	if err != nil {
		t.Fatal(err)
	}
	// A key-group filter keeps unkeyed buckets.
	kgs, _ := SubtaskKeyGroups(i, parallelism, testMaxKeyGroups)
	if err := be.Restore(c.source(), RestoreOptions{KeyGroups: &kgs}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Its next snapshot holds only its share.
	var after chain
	after.take(t, be, true).Close()
	if len(after.entries) > 1 {
		t.Fatalf("subtask %d keeps %d entries after taking its share", i, len(after.entries))
	}
	return got
}

func TestOperatorListState_Redistribution(t *testing.T) {
	sizes := []int{3, 0, 4}
	all := []int64{0, 1, 2, 200, 201, 202, 203}
	tests := []struct {
		name        string
		mode        Redistribution
		parallelism int
		want        [][]int64
	}{
		{"split, same parallelism", SplitRedistribution, 3, [][]int64{{0, 1, 2}, nil, {200, 201, 202, 203}}},
		{"split, scale in", SplitRedistribution, 2, [][]int64{{0, 1, 2}, {200, 201, 202, 203}}},
		{"split, scale out", SplitRedistribution, 4, [][]int64{{0}, {1, 2}, {200, 201}, {202, 203}}},
		{"union", UnionRedistribution, 2, [][]int64{all, all}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := writeOperatorState(t, 3, sizes, tt.mode)
			for i := range tt.parallelism {
				got := restoreOperatorState(t, c, i, tt.parallelism, tt.mode)
				if !slices.Equal(got, tt.want[i]) {
					t.Errorf("subtask %d of %d: %v, want %v", i, tt.parallelism, got, tt.want[i])
				}
			}
		})
	}
}

func TestOperatorListState_UpdateAndClear(t *testing.T) {
	be := NewMemory()
	s, _ := NewOperatorListState(be, "sink", "pending", StringCodec{}, OperatorListOptions{Subtask: 0, Parallelism: 1, Redistribution: SplitRedistribution})
	s.Add("a")
	s.Update([]string{"x", "y"})
	s.Add("z")
	if got, _ := s.Get(nil); fmt.Sprint(got) != "[x y z]" {
		t.Fatalf("got %v", got)
	}
	s.Clear()
	if got, _ := s.Get(nil); len(got) != 0 {
		t.Fatalf("after Clear: %v", got)
	}
	for _, opts := range []OperatorListOptions{{0, 0, SplitRedistribution}, {2, 2, SplitRedistribution}, {0, 1, 0}} {
		if _, err := NewOperatorListState(be, "sink", "x", StringCodec{}, opts); err == nil {
			t.Errorf("%+v accepted", opts)
		}
	}
}
