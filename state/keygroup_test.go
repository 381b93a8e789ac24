package state

import "testing"

func TestKeyGroup_Stable(t *testing.T) {
	// Pinned values: a change here breaks every existing checkpoint.
	cases := []struct {
		key  string
		want uint16
	}{
		{"", uint16(14695981039346656037 % 128)},
		{"a", uint16(0xaf63dc4c8601ec8c % 128)},
		{"foobar", uint16(0x85944171f73967e8 % 128)},
	}
	for _, c := range cases {
		if got := KeyGroup([]byte(c.key), 128); got != c.want {
			t.Errorf("KeyGroup(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}

func TestSubtask_ContiguousRanges(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 128} {
		prev := 0
		seen := map[int]bool{}
		for kg := 0; kg < 128; kg++ {
			s := Subtask(uint16(kg), n, 128)
			if s < prev || s >= n {
				t.Fatalf("n=%d kg=%d: subtask %d after %d", n, kg, s, prev)
			}
			prev = s
			seen[s] = true
		}
		if len(seen) != n {
			t.Fatalf("n=%d: %d subtasks used", n, len(seen))
		}
	}
}
