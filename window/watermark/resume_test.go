package watermark

import (
	"errors"
	"testing"
)

// resumeStep is one reading: its logged arrival, whether it opens a resumed
// session, and its event time.
type resumeStep struct {
	arrival int64
	resumed bool
	ts      int64
}

// run feeds steps through a Resume in front of a bounded generator, as the
// prepare stage does, and returns the watermark in effect before each
// reading and whether it was in an episode.
func run(r *Resume, g *BoundedOutOfOrder, steps []resumeStep) (wms []int64, in []bool) {
	for _, s := range steps {
		r.Arrive(s.arrival, s.resumed, r.Apply(g.Current()))
		wms = append(wms, r.Apply(g.Current()))
		in = append(in, r.InEpisode())
		if s.ts <= g.Current() {
			r.Behind()
		}
		g.Observe(s.ts)
	}
	return wms, in
}

func TestResume(t *testing.T) {
	tests := []struct {
		name   string
		holdMs int64
		steps  []resumeStep
		wms    []int64 // watermark before each reading (bound 0: max seen − 1)
		in     []bool
	}{
		{"no resume: the generator's watermark, no episode", 5000,
			[]resumeStep{{1000, false, 100}, {1001, false, 200}, {1002, false, 300}},
			[]int64{Min, 99, 199}, []bool{false, false, false}},
		{"hold: the watermark stays until 5 s of arrival passed without a reading behind it", 5000,
			[]resumeStep{{1000, false, 100}, {2000, true, 900}, {3000, false, 950}, {6999, false, 200}, {7000, false, 960}, {11_998, false, 970}, {11_999, false, 980}},
			// the stored reading at 200 arrives behind 900 and 950, on time, and restarts the quiet time
			[]int64{Min, 99, 99, 99, 99, 99, 969}, []bool{false, true, true, true, true, true, true}},
		{"hold: without a backlog it costs the hold", 5000,
			[]resumeStep{{1000, false, 100}, {2000, true, 900}, {6999, false, 950}, {7000, false, 960}},
			[]int64{Min, 99, 99, 949}, []bool{false, true, true, true}},
		{"hold: at most ten holds long", 1000,
			[]resumeStep{{0, true, 1000}, {500, false, 10}, {1400, false, 10}, {2300, false, 10}, {3200, false, 10}, {4100, false, 10}, {5000, false, 10},
				{5900, false, 10}, {6800, false, 10}, {7700, false, 10}, {8600, false, 10}, {9500, false, 10}, {9999, false, 10}, {10_000, false, 10}},
			[]int64{Min, Min, Min, Min, Min, Min, Min, Min, Min, Min, Min, Min, Min, 999},
			[]bool{true, true, true, true, true, true, true, true, true, true, true, true, true, true}},
		{"no hold: the watermark runs ahead, the episode blames the late", 0,
			[]resumeStep{{1000, false, 100}, {2000, true, 900}, {3000, false, 200}},
			[]int64{Min, 99, 899}, []bool{false, true, true}},
		{"episode ends after the blame time", 0,
			[]resumeStep{{0, true, 1}, {DefaultBlameMs - 1, false, 2}, {DefaultBlameMs, false, 3}},
			[]int64{Min, 0, 1}, []bool{true, true, false}},
		{"a resume during a hold restarts it at the held value", 5000,
			[]resumeStep{{1000, false, 100}, {2000, true, 500}, {6000, true, 600}, {10_999, false, 700}, {11_000, false, 800}},
			[]int64{Min, 99, 99, 99, 699}, []bool{false, true, true, true, true}},
		{"a wall-clock arrival back adds no arrival time", 5000,
			[]resumeStep{{10_000, false, 100}, {11_000, true, 500}, {2000, false, 600}, {6999, false, 700}, {7000, false, 800}},
			// 11,000 → 2,000 counts nothing; 2,000 → 7,000 is the 5 s
			[]int64{Min, 99, 99, 99, 699}, []bool{false, true, true, true, true}},
		{"the first reading ever may carry the flag", 1000,
			[]resumeStep{{5000, true, 100}, {5500, false, 50}, {6000, false, 200}, {6500, false, 300}},
			[]int64{Min, Min, Min, 199}, []bool{true, true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wms, in := run(NewResume(tt.holdMs), NewMonotonous(), tt.steps)
			for i := range tt.steps {
				if wms[i] != tt.wms[i] || in[i] != tt.in[i] {
					t.Fatalf("reading %d: watermark %d in episode %v, want %d %v (all: %v %v)", i, wms[i], in[i], tt.wms[i], tt.in[i], wms, in)
				}
			}
		})
	}
}

// TestResume_RestoreMidHold: a checkpoint taken in the middle of a hold and
// restored (the generator put back at its own watermark, the Resume at its
// state) gives the same watermarks for the rest of the log as the run that
// never stopped.
func TestResume_RestoreMidHold(t *testing.T) {
	steps := []resumeStep{{1000, false, 100}, {2000, true, 900}, {3000, false, 950}, {4000, false, 300},
		{5000, false, 980}, {6500, false, 400}, {7000, false, 990}, {8000, false, 1000}}
	want, _ := run(NewResume(5000), NewMonotonous(), steps)
	for cut := 1; cut < len(steps); cut++ {
		r, g := NewResume(5000), NewMonotonous()
		run(r, g, steps[:cut])
		enc := r.State().AppendBinary(nil)
		st, err := UnmarshalResumeState(enc)
		if err != nil {
			t.Fatal(err)
		}
		r2, g2 := NewResume(5000), NewMonotonous()
		r2.Restore(st)
		g2.Observe(g.Current() + 1) // the restore puts the generator at its watermark
		got, _ := run(r2, g2, steps[cut:])
		for i := range got {
			if got[i] != want[cut+i] {
				t.Fatalf("restored after %d readings: reading %d watermark %d, want %d", cut, cut+i, got[i], want[cut+i])
			}
		}
	}
}

func TestResumeState_Encoding(t *testing.T) {
	st := ResumeState{Episode: 3, Elapsed: 1234, Quiet: 567, LastArrival: 1_700_000_000_000, Held: true, HeldAt: Min}
	got, err := UnmarshalResumeState(st.AppendBinary(nil))
	if err != nil || got != st {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, st)
	}
	for _, b := range [][]byte{nil, make([]byte, resumeStateLen), append([]byte{2, 0}, make([]byte, 40)...), append([]byte{1, 2}, make([]byte, 40)...)} {
		if _, err := UnmarshalResumeState(b); !errors.Is(err, ErrBadResumeState) {
			t.Errorf("%x: %v, want ErrBadResumeState", b, err)
		}
	}
}

// TestResume_ReleaseBy: a hold ends on the wall clock when no reading
// comes, at the time the next reading would have ended it.
func TestResume_ReleaseBy(t *testing.T) {
	tests := []struct {
		name   string
		holdMs int64
		now    int64
		want   bool
	}{
		{"before the hold has passed", 5000, 7999, false},
		{"when it has passed", 5000, 8000, true},
		{"a clock behind the last arrival", 5000, 1000, false},
		{"no hold", 0, 100_000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, g := NewResume(tt.holdMs), NewMonotonous()
			run(r, g, []resumeStep{{1000, false, 100}, {2000, true, 900}, {3000, false, 200}})
			holding := tt.holdMs > 0 && !tt.want
			if got := r.ReleaseBy(tt.now); got != tt.want || r.Holding() != holding {
				t.Fatalf("ReleaseBy(%d) = %v, holding %v; want %v, %v", tt.now, got, r.Holding(), tt.want, holding)
			}
			if tt.want && r.Apply(g.Current()) != 899 {
				t.Fatalf("released watermark %d, want 899", r.Apply(g.Current()))
			}
		})
	}
}
