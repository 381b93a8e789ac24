package stages

import "testing"

func TestStateShape_Differs(t *testing.T) {
	base := stateShape{Window: "sliding event 30s 10s", Key: "event.device", Source: "in", Aggregates: []string{"n = count() q=0"}}
	for _, c := range []struct {
		name   string
		change func(*stateShape)
		want   string
	}{
		{"same", func(*stateShape) {}, ""},
		{"window", func(s *stateShape) { s.Window = "sliding event 60s 10s" }, "the window"},
		{"key", func(s *stateShape) { s.Key = "event.site" }, "the key"},
		{"source", func(s *stateShape) { s.Source = "other" }, "the source"},
		{"an aggregate", func(s *stateShape) { s.Aggregates = []string{"n = count(event.v) q=0"} }, "the aggregates"},
		{"one more aggregate", func(s *stateShape) { s.Aggregates = append(s.Aggregates[:1:1], "m = max(event.v) q=0") }, "the aggregates"},
		{"window and key: the window first", func(s *stateShape) { s.Window, s.Key = "", "" }, "the window"},
		{"per-key functions", func(s *stateShape) { s.Keyed = "; changed(event.s)" }, "the per-key functions"},
	} {
		next := base
		c.change(&next)
		if got := base.differs(next); got != c.want {
			t.Errorf("%s: differs = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestOtherWindowState(t *testing.T) {
	for _, c := range []struct {
		bucket, mine string
		want         string // "" for not another layout's
	}{
		{"window/windows", windowStatePerWindow, ""},
		{"panes/windows", windowStatePanes, ""},
		{"window/timers", windowStatePanes, windowStatePerWindow},
		{"panes/windows", windowStatePerWindow, windowStatePanes},
		{"inflight", windowStatePanes, ""},
		{"held", windowStatePerWindow, ""},
		{"windows/x", windowStatePanes, ""}, // a longer name is not "window"
		{"window", windowStatePanes, ""},    // no "/": not a window state bucket
	} {
		name, ok := otherWindowState([]byte(c.bucket), c.mine)
		if ok != (c.want != "") || name != c.want {
			t.Errorf("otherWindowState(%q, %q) = %q, %v; want %q", c.bucket, c.mine, name, ok, c.want)
		}
	}
}
