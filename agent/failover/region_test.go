package failover

import (
	"slices"
	"strings"
	"testing"
)

// TestFailoverRegions: pipelines that share a source (read or control) or
// a sink (to, late_output, dead_letter) form one region, with those sources
// and sinks; pipelines sharing nothing are each their own region.
func TestFailoverRegions(t *testing.T) {
	const head = `
agent {
  data_dir = "%DATA%"
  admin    = ""
}
source "file" "a" { path = "/dev/null" }
source "file" "b" { path = "/dev/null" }
source "file" "c" { path = "/dev/null" }
sink "stdout" "one" {}
sink "stdout" "two" {}
sink "stdout" "three" {}
`
	for _, tc := range []struct {
		name, pipelines string
		want            []string // "pipelines sources sinks", sorted
	}{
		{"separate", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from = source.file.b
  to   = [sink.stdout.two]
}`, []string{"x a one", "y b two"}},
		{"shared source", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from = source.file.a
  to   = [sink.stdout.two]
}
pipeline "z" {
  from = source.file.b
  to   = [sink.stdout.three]
}`, []string{"x,y a one,two", "z b three"}},
		{"shared sink", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from = source.file.b
  to   = [sink.stdout.one]
}`, []string{"x,y a,b one"}},
		{"control source and dead letters", `
pipeline "x" {
  from = source.file.a
  to   = [sink.stdout.one]
}
pipeline "y" {
  from    = source.file.b
  control = source.file.a
  to      = [sink.stdout.two]
}
pipeline "z" {
  from        = source.file.c
  to          = [sink.stdout.three]
  dead_letter = sink.stdout.two
}`, []string{"x,y,z a,b,c one,three,two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mustBuildAgent(t, head+tc.pipelines, false)
			var got []string
			for _, r := range a.failover.regions {
				srcs, sinks := slices.Sorted(slices.Values(r.sources)), slices.Sorted(slices.Values(r.sinks))
				got = append(got, r.name+" "+strings.Join(srcs, ",")+" "+strings.Join(sinks, ","))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("regions %q, want %q", got, tc.want)
			}
		})
	}
}
