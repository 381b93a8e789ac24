package window

import (
	"fmt"
	"github.com/eddy-edge/eddy/window/aggregate"
	"slices"
	"testing"
)

func TestMemoryStore_Timers(t *testing.T) {
	s := NewMemoryStore()
	add := func(key string, tm int64, w Window) {
		s.SetCurrentKey(1, []byte(key))
		s.AddTimer(EventTime, tm, w)
	}
	add("b", 10, Window{0, 11})
	add("a", 10, Window{5, 11})
	add("a", 10, Window{0, 11})
	add("a", 10, Window{0, 11}) // a set: no duplicate
	add("c", 5, Window{0, 6})
	add("a", 20, Window{0, 21})
	s.SetCurrentKey(1, []byte("b"))
	s.AddTimer(ProcessingTime, 1, Window{0, 11})
	if _, n := s.Counts(); n != 6 {
		t.Fatalf("%d timers, want 6", n)
	}
	s.SetCurrentKey(1, []byte("a"))
	s.DeleteTimer(EventTime, 20, Window{0, 21})
	s.DeleteTimer(EventTime, 99, Window{0, 21}) // absent: no-op

	var got []string
	for {
		tm, ok := s.PopTimer(EventTime, 15)
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%d %s %v", tm.Time, tm.Key, tm.Window))
	}
	want := []string{"5 c [0,6)", "10 a [0,11)", "10 a [5,11)", "10 b [0,11)"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	if _, ok := s.PopTimer(ProcessingTime, 0); ok {
		t.Fatal("popped a processing-time timer not yet due")
	}
	if tm, ok := s.PopTimer(ProcessingTime, 1); !ok || string(tm.Key) != "b" {
		t.Fatalf("processing-time timer: %v %v", tm, ok)
	}
	if _, n := s.Counts(); n != 0 {
		t.Fatalf("%d timers left", n)
	}
}

// A timer added at the time being drained is still popped in the same pass.
func TestMemoryStore_TimerAddedWhileDraining(t *testing.T) {
	s := NewMemoryStore()
	s.SetCurrentKey(0, []byte("a"))
	s.AddTimer(EventTime, 10, Window{0, 1})
	if _, ok := s.PopTimer(EventTime, 10); !ok {
		t.Fatal("no timer")
	}
	s.SetCurrentKey(0, []byte("b"))
	s.AddTimer(EventTime, 10, Window{0, 1})
	s.AddTimer(EventTime, 3, Window{0, 2}) // in the past: still due
	n := 0
	for {
		if _, ok := s.PopTimer(EventTime, 10); !ok {
			break
		}
		n++
	}
	if n != 2 {
		t.Fatalf("popped %d, want 2", n)
	}
}

func TestMemoryStore_Windows(t *testing.T) {
	s := NewMemoryStore()
	s.SetCurrentKey(3, []byte("k"))
	if s.Window(Window{0, 1}) != nil {
		t.Fatal("window of an unknown key")
	}
	for i := range int64(10) {
		st := s.CreateWindow(Window{i, i + 1}, 2)
		st.Accs[0].N = i
		st.Fired = i
	}
	s.DeleteWindow(Window{3, 4})
	if !s.MoveWindow(Window{5, 6}, Window{5, 60}) || s.MoveWindow(Window{5, 6}, Window{7, 70}) {
		t.Fatal("MoveWindow")
	}
	for i := range int64(10) {
		w := Window{i, i + 1}
		if i == 5 {
			w.End = 60
		}
		st := s.Window(w)
		if i == 3 {
			if st != nil {
				t.Fatal("deleted window is back")
			}
			continue
		}
		if st == nil || st.Accs[0].N != i || st.Fired != i || len(st.Accs) != 2 {
			t.Fatalf("window %v: %+v", w, st)
		}
	}
	if n, _ := s.Counts(); n != 9 {
		t.Fatalf("%d windows, want 9", n)
	}
	// A foreign state is copied in by PutWindow.
	foreign := WindowState{Fired: 42, Accs: make([]aggregate.Acc, 2)}
	s.PutWindow(Window{0, 1}, &foreign)
	if s.Window(Window{0, 1}).Fired != 42 {
		t.Fatal("PutWindow did not copy a foreign state")
	}
}

// Keys without state are forgotten, so memory follows the live key set.
func TestMemoryStore_Sweep(t *testing.T) {
	s := NewMemoryStore()
	for i := range 3 * minSweep {
		k := []byte(fmt.Sprint(i))
		s.SetCurrentKey(0, k)
		s.CreateWindow(Window{0, 1}, 1)
		s.DeleteWindow(Window{0, 1})
	}
	s.SetCurrentKey(0, []byte("x"))
	if len(s.keys) >= 2*minSweep {
		t.Fatalf("%d keys kept", len(s.keys))
	}
	s.SetCurrentKey(0, []byte("count"))
	s.PutReadingCount(5)
	for i := range 3 * minSweep {
		s.SetCurrentKey(0, []byte(fmt.Sprint(i)))
		s.CreateWindow(Window{0, 1}, 1)
		s.DeleteWindow(Window{0, 1})
	}
	s.SetCurrentKey(0, []byte("count"))
	if s.ReadingCount() != 5 {
		t.Fatal("sweep lost a key with state")
	}
}

// Timers of one time come out in bytes.Compare order of their keys, also
// when the keys share long prefixes or are prefixes of each other.
func TestMemoryStore_TimerKeyOrder(t *testing.T) {
	keys := []string{"device-10", "device-1", "device-10\x00x", "device-", "device-2", "device-10\x00", "device-1000000000000000001", "device-1000000000000000000", "device-\x00"}
	s := NewMemoryStore()
	for _, k := range keys {
		s.SetCurrentKey(0, []byte(k))
		s.AddTimer(EventTime, 7, Window{0, 8})
	}
	var got []string
	for {
		tm, ok := s.PopTimer(EventTime, 7)
		if !ok {
			break
		}
		got = append(got, string(tm.Key))
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
}
