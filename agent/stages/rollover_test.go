package stages

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/checkpoint"
)

func TestCommonBoundary(t *testing.T) {
	for _, c := range []struct {
		name      string
		t         int64
		old, next grid
		want      int64
	}{
		{"same grid: the next boundary", 12_345, grid{size: 10_000}, grid{size: 10_000}, 20_000},
		{"on a boundary: the one after", 20_000, grid{size: 10_000}, grid{size: 10_000}, 30_000},
		{"10 s to 1 min: a minute", 12_345, grid{size: 10_000}, grid{size: 60_000}, 60_000},
		{"1 min to 10 s", 61_000, grid{size: 60_000}, grid{size: 10_000}, 120_000},
		{"offsets", 1_000, grid{size: 10_000, offset: 5_000}, grid{size: 20_000, offset: 5_000}, 5_000},
		{"negative times", -12_345, grid{size: 10_000}, grid{size: 10_000}, -10_000},
	} {
		next := c.next
		if got, ok := commonBoundary(c.t, c.old, &next); !ok || got != c.want {
			t.Errorf("%s: commonBoundary = %d, %v; want %d", c.name, got, ok, c.want)
		}
	}
	if _, ok := commonBoundary(0, grid{size: 10_000}, &grid{size: 10_000, offset: 3}); ok {
		t.Error("grids that never meet have a common boundary")
	}
}

// rollManifest is a checkpoint of pipeline "p" with shape was, its
// definition recorded unless noDefinition, and the watermark and newest
// event time given.
func rollManifest(t *testing.T, was stateShape, wm, maxTime int64, noDefinition bool) *checkpoint.Manifest {
	t.Helper()
	b, err := json.Marshal(was)
	if err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Manifest{ID: 7, Extra: map[string][]byte{
		shapeExtraKey("p"):        b,
		watermarkExtraKey("p", 0): binary.BigEndian.AppendUint64(nil, uint64(wm)),
		maxTimeExtraKey("p"):      binary.BigEndian.AppendUint64(nil, uint64(maxTime)),
		definitionExtraKey("p"):   []byte(`pipeline "p" {}`),
	}}
	if noDefinition {
		delete(m.Extra, definitionExtraKey("p"))
	}
	return m
}

func TestCheckRollover(t *testing.T) {
	none, filter := "", "event.v > 1"
	noMap := []string{}
	base := stateShape{Window: "tumbling event 10s 0s 0s 0s 0 0 5s 0s 0", Key: "event.device", Source: "in",
		Aggregates: []string{"n = count() q=0"}, Filter: &none, Map: &noMap}
	shape := func(change func(*stateShape)) []byte {
		s := base
		change(&s)
		b, _ := json.Marshal(s)
		return b
	}
	never := func(string) bool { return false }
	for _, c := range []struct {
		name         string
		now          []byte // nil: removed
		noDefinition bool
		wm, maxTime  int64
		// want is Text(), or the refusal's start ("refuse: …").
		want     string
		cut      int64
		retireAt int64
	}{
		{name: "unchanged", now: shape(func(*stateShape) {}), wm: 12_000, maxTime: 17_000, want: ""},
		{name: "aggregate added", now: shape(func(s *stateShape) { s.Aggregates = append(s.Aggregates[:1:1], "m = max(event.v) q=0") }),
			wm: 12_000, maxTime: 17_000, cut: 20_000, retireAt: 24_999,
			want: "roll over: aggregates changed (m added): its open windows finish as before; windows from 1970-01-01T00:00:20Z use the new aggregates"},
		{name: "the cut lies after the newest reading, not only the watermark", now: shape(func(s *stateShape) { s.Key = "event.site" }),
			wm: 12_000, maxTime: 21_000, cut: 30_000, retireAt: 34_999,
			want: "roll over: key changed (event.device → event.site): its open windows finish as before; windows from 1970-01-01T00:00:30Z use the new key"},
		{name: "size 10 s to 1 min", now: shape(func(s *stateShape) { s.Window = "tumbling event 1m0s 0s 0s 0s 0 0 5s 0s 0" }),
			wm: 12_000, maxTime: 17_000, cut: 60_000, retireAt: 64_999,
			want: "roll over: window changed (size 10s → 1m0s): its open windows finish as before; windows from 1970-01-01T00:01:00Z use the new window"},
		{name: "a filter added", now: shape(func(s *stateShape) { s.Filter = &filter }), wm: 12_000, maxTime: 17_000, cut: 20_000, retireAt: 24_999,
			want: "roll over: filter changed (none → event.v > 1): its open windows finish as before; windows from 1970-01-01T00:00:20Z use the new filter"},
		{name: "removed", wm: 12_000, maxTime: 17_000, cut: 20_000, retireAt: 24_999,
			want: "roll over: removed from the configuration: its open windows finish as before; it takes no reading from 1970-01-01T00:00:20Z"},
		{name: "no reading yet", now: shape(func(s *stateShape) { s.Key = "event.site" }), wm: math.MinInt64, maxTime: math.MinInt64,
			want: "start empty: its old definition took no reading, so it has no window open"},
		{name: "to a sliding window", now: shape(func(s *stateShape) { s.Window = "sliding event 20s 10s 0s 0s 0 0 5s 0s 0" }), wm: 12_000, maxTime: 17_000,
			want: "refuse: agent: checkpoint 7 holds pipeline \"p\"'s state, and window changed (kind tumbling → sliding, size 10s → 20s, slide 0s → 10s), which cannot roll over: its new window is sliding on event time"},
		{name: "another source", now: shape(func(s *stateShape) { s.Source = "other" }), wm: 12_000, maxTime: 17_000,
			want: "refuse: agent: checkpoint 7 holds pipeline \"p\"'s state, and source changed (in → other), which cannot roll over: its source changed"},
		{name: "a checkpoint without the definition", now: shape(func(s *stateShape) { s.Key = "event.site" }), noDefinition: true, wm: 12_000, maxTime: 17_000,
			want: "refuse: agent: checkpoint 7 holds pipeline \"p\"'s state, and key changed (event.device → event.site), which cannot roll over: the checkpoint was written by a build that does not record pipeline definitions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := rollManifest(t, base, c.wm, c.maxTime, c.noDefinition)
			v := CheckRollover(m, "p", c.now, c.now == nil, never, 0)
			if rest, ok := strings.CutPrefix(c.want, "refuse: "); ok {
				if v.Refusal == nil || !strings.HasPrefix(v.Refusal.Error(), rest) {
					t.Fatalf("refusal %v, want one starting %q", v.Refusal, rest)
				}
				return
			}
			if v.Refusal != nil {
				t.Fatalf("refused: %v", v.Refusal)
			}
			if c.want == "" {
				if v.Roll != nil || v.Retired {
					t.Fatalf("an unchanged pipeline rolls over: %+v", v)
				}
				return
			}
			if got := v.Text(); got != c.want {
				t.Fatalf("Text() =\n%s\nwant\n%s", got, c.want)
			}
			if c.cut != 0 && (v.Roll.Cut != c.cut || v.Roll.RetireAt != c.retireAt || !v.Fresh) {
				t.Fatalf("cut %d retire at %d fresh %v; want %d, %d, true", v.Roll.Cut, v.Roll.RetireAt, v.Fresh, c.cut, c.retireAt)
			}
		})
	}
}

// TestCheckRollover_Resumed: a checkpoint taken during a rollover resumes
// it with the same cut until the old definition's watermark passes its
// lateness; a further change meanwhile cannot roll over; the new
// definition keeps its cut after the old one retired.
func TestCheckRollover_Resumed(t *testing.T) {
	r := Rollover{Pipeline: "p", Old: "p--old-abcd", OldHash: "abcd", Block: `pipeline "p" {}`, Cut: 20_000, RetireAt: 24_999, Changes: "aggregates changed (m added)"}
	now := []byte(`{"window":"tumbling event 10s 0s 0s 0s 0 0 5s 0s 0","key":"k","source":"in","aggregates":["n = count() q=0","m = max(event.v) q=0"]}`)
	manifest := func(oldWM int64, recorded []byte) *checkpoint.Manifest {
		rec, _ := json.Marshal(r)
		return &checkpoint.Manifest{ID: 9, Extra: map[string][]byte{
			rolloverExtraKey("p"):       rec,
			shapeExtraKey("p"):          recorded,
			sinceExtraKey("p"):          binary.BigEndian.AppendUint64(nil, 20_000),
			watermarkExtraKey(r.Old, 0): binary.BigEndian.AppendUint64(nil, uint64(oldWM)),
			watermarkExtraKey("p", 0):   binary.BigEndian.AppendUint64(nil, uint64(oldWM)),
		}}
	}
	never := func(string) bool { return false }
	v := CheckRollover(manifest(22_000, now), "p", now, false, never, 0)
	if !v.Runs() || v.Fresh || v.Roll.Cut != 20_000 || v.Since != 20_000 {
		t.Fatalf("mid-rollover: %+v", v)
	}
	if got, want := v.Text(), "roll over (resumed): aggregates changed (m added): its open windows finish as before; windows from 1970-01-01T00:00:20Z use the new definition"; got != want {
		t.Fatalf("Text() = %q, want %q", got, want)
	}
	v = CheckRollover(manifest(25_000, now), "p", now, false, never, 0)
	if v.Runs() || !v.Retired || v.Since != 20_000 {
		t.Fatalf("after its lateness: %+v", v)
	}
	if v := CheckRollover(manifest(25_000, now), "p", now, false, func(string) bool { return true }, 0); !v.Retired {
		t.Fatalf("a bounded file's old definition retires only with the run, but the record says held=false: %+v", v)
	}
	again := []byte(strings.Replace(string(now), `"k"`, `"k2"`, 1))
	if v := CheckRollover(manifest(22_000, now), "p", again, false, never, 0); v.Refusal == nil ||
		!strings.Contains(v.Refusal.Error(), "changed again (key changed (k → k2)) while its previous change still rolls over") {
		t.Fatalf("a second change during the rollover: %v", v.Refusal)
	}
}

// TestCheckRollover_ProcessingTime: on processing time the cut is the
// first boundary common to both windows after the restart (at), not after
// the checkpoint's newest arrival; its words name no time, since validate
// cannot know the restart; a change between event and processing time,
// or of a file source's pipeline, cannot roll over; a checkpoint taken
// during the rollover resumes it with the same cut, and retires it once
// the old instance's processing time passed the cut.
func TestCheckRollover_ProcessingTime(t *testing.T) {
	noMap, none := []string{}, ""
	base := stateShape{Window: "tumbling processing 10s 0s 0s 0s 0 0 0s 0s 0", Key: "event.device", Source: "in",
		Aggregates: []string{"n = count() q=0"}, Filter: &none, Map: &noMap}
	shape := func(change func(*stateShape)) []byte {
		s := base
		change(&s)
		b, _ := json.Marshal(s)
		return b
	}
	never := func(string) bool { return false }
	for _, c := range []struct {
		name     string
		now      []byte // nil: removed
		at       int64  // the restart
		bounded  bool
		want     string // Text(), or "refuse: " and the start of the refusal's why
		cut      int64
		retireAt int64
	}{
		{name: "aggregate added: the boundary after the restart", now: shape(func(s *stateShape) { s.Aggregates = append(s.Aggregates[:1:1], "m = max(event.v) q=0") }),
			at: 43_210, cut: 50_000, retireAt: 49_999,
			want: "roll over: aggregates changed (m added): its open windows finish as before; windows from the first boundary of both the old and the new windows on processing time after the start use the new aggregates"},
		{name: "size 10 s to 1 min: the first common boundary", now: shape(func(s *stateShape) { s.Window = "tumbling processing 1m0s 0s 0s 0s 0 0 0s 0s 0" }),
			at: 43_210, cut: 60_000, retireAt: 59_999,
			want: "roll over: window changed (size 10s → 1m0s): its open windows finish as before; windows from the first boundary of both the old and the new windows on processing time after the start use the new window"},
		{name: "a restart on a boundary cuts at the next", now: shape(func(s *stateShape) { s.Key = "event.site" }), at: 50_000, cut: 60_000, retireAt: 59_999,
			want: "roll over: key changed (event.device → event.site): its open windows finish as before; windows from the first boundary of both the old and the new windows on processing time after the start use the new key"},
		{name: "a clock behind the newest arrival: after the arrival", now: shape(func(s *stateShape) { s.Key = "event.site" }), at: 1_000, cut: 20_000, retireAt: 19_999,
			want: "roll over: key changed (event.device → event.site): its open windows finish as before; windows from the first boundary of both the old and the new windows on processing time after the start use the new key"},
		{name: "removed", at: 43_210, cut: 50_000, retireAt: 49_999,
			want: "roll over: removed from the configuration: its open windows finish as before; it takes no reading from the first boundary of both the old and the new windows on processing time after the start"},
		{name: "to event time", now: shape(func(s *stateShape) { s.Window = "tumbling event 10s 0s 0s 0s 0 0 0s 0s 0" }), at: 43_210,
			want: "refuse: window changed (time processing → event), which cannot roll over: its windows changed between event and processing time"},
		{name: "a file source", now: shape(func(s *stateShape) { s.Key = "event.site" }), at: 43_210, bounded: true,
			want: "refuse: key changed (event.device → event.site), which cannot roll over: its windows are on processing time, and a file's readings"},
		{name: "to a session window", now: shape(func(s *stateShape) { s.Window = "session processing 0s 0s 0s 30s 0 0 0s 0s 0" }), at: 43_210,
			want: "refuse: window changed (kind tumbling → session, size 10s → 0s, gap 0s → 30s), which cannot roll over: its new window is session on processing time, and only tumbling windows roll over"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := rollManifest(t, base, math.MinInt64, 17_000, false)
			delete(m.Extra, watermarkExtraKey("p", 0))
			v := CheckRollover(m, "p", c.now, c.now == nil, func(string) bool { return c.bounded }, c.at)
			if again := CheckRollover(m, "p", c.now, c.now == nil, func(string) bool { return c.bounded }, c.at); again.Text() != v.Text() ||
				(v.Roll != nil) != (again.Roll != nil) || v.Roll != nil && *v.Roll != *again.Roll {
				t.Fatalf("the same arguments gave another verdict: %+v, then %+v", v, again)
			}
			if why, ok := strings.CutPrefix(c.want, "refuse: "); ok {
				if v.Refusal == nil || !strings.HasPrefix(v.Why, why) {
					t.Fatalf("refusal %v (why %q), want a why starting %q", v.Refusal, v.Why, why)
				}
				return
			}
			if v.Refusal != nil {
				t.Fatalf("refused: %v", v.Refusal)
			}
			if got := v.Text(); got != c.want {
				t.Fatalf("Text() =\n%s\nwant\n%s", got, c.want)
			}
			if v.Roll.Cut != c.cut || v.Roll.RetireAt != c.retireAt || !v.Roll.ProcessingTime || !v.Fresh {
				t.Fatalf("cut %d retire at %d processing %v fresh %v; want %d, %d, true, true", v.Roll.Cut, v.Roll.RetireAt, v.Roll.ProcessingTime, v.Fresh, c.cut, c.retireAt)
			}
		})
	}

	// Resumed from a checkpoint taken during the rollover: the same cut,
	// whatever the clock; retired once the old instance's processing
	// time (its recorded newest time) reached RetireAt.
	r := Rollover{Pipeline: "p", Old: "p--old-abcd", OldHash: "abcd", Block: `pipeline "p" {}`, Cut: 50_000, RetireAt: 49_999,
		Changes: "key changed (event.device → event.site)", ProcessingTime: true}
	now := shape(func(s *stateShape) { s.Key = "event.site" })
	resumed := func(oldTime int64) *checkpoint.Manifest {
		rec, _ := json.Marshal(r)
		return &checkpoint.Manifest{ID: 9, Extra: map[string][]byte{
			rolloverExtraKey("p"):  rec,
			shapeExtraKey("p"):     now,
			sinceExtraKey("p"):     binary.BigEndian.AppendUint64(nil, 50_000),
			maxTimeExtraKey(r.Old): binary.BigEndian.AppendUint64(nil, uint64(oldTime)),
		}}
	}
	v := CheckRollover(resumed(49_998), "p", now, false, never, 900_000)
	if !v.Runs() || v.Fresh || v.Roll.Cut != 50_000 || v.Since != 50_000 {
		t.Fatalf("mid-rollover: %+v", v)
	}
	if got, want := v.Text(), "roll over (resumed): key changed (event.device → event.site): its open windows finish as before; windows from 1970-01-01T00:00:50Z use the new definition"; got != want {
		t.Fatalf("Text() = %q, want %q", got, want)
	}
	if v := CheckRollover(resumed(49_999), "p", now, false, never, 900_000); v.Runs() || !v.Retired || v.Since != 50_000 {
		t.Fatalf("after the cut: %+v", v)
	}
}
