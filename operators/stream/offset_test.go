package stream

import "testing"

func TestReadingOffset(t *testing.T) {
	cases := []struct {
		name   string
		offset uint64
		i      int
		ok     bool
	}{
		{"first reading", 7, 0, true},
		{"a later reading", 7, 3, true},
		{"offset zero", 0, 1, true},
		{"last index", 7, MaxReadingsPerMessage - 1, true},
		{"index too large", 7, MaxReadingsPerMessage, false},
		{"negative index", 7, -1, false},
		{"largest offset", maxMessageOffset, 5, true},
		{"offset too large", maxMessageOffset + 1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, ok := ReadingOffset(c.offset, c.i)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if ok && MessageOffset(o) != c.offset {
				t.Fatalf("MessageOffset(%#x) = %d, want %d", o, MessageOffset(o), c.offset)
			}
		})
	}
}

// Reading offsets order as the readings came: by message, then by index,
// after every plain message offset, and never equal one another.
func TestReadingOffset_Order(t *testing.T) {
	var prev uint64
	seen := map[uint64]bool{}
	for _, off := range []uint64{0, 1, 2, 1000, 1 << 40} {
		for i := range 3 {
			o, _ := ReadingOffset(off, i)
			if o <= prev || seen[o] {
				t.Fatalf("ReadingOffset(%d, %d) = %#x does not follow %#x", off, i, o, prev)
			}
			if o < readingFlag {
				t.Fatalf("ReadingOffset(%d, %d) = %#x orders before plain message offsets", off, i, o)
			}
			prev = o
			seen[o] = true
		}
	}
	if MessageOffset(12345) != 12345 {
		t.Fatal("a plain offset is its own message offset")
	}
}
