package probe

import (
	"context"
	"fmt"
)

// Run probes plan's sinks (upstream) or sources, only the one called name
// when name is set, one after the other, and returns the finished report;
// found is false when there was nothing to probe.
func Run(ctx context.Context, plan *Plan, upstream bool, name string) (rep *Report, found bool) {
	rep = &Report{DeviceID: plan.DeviceID, Skipped: plan.Skipped}
	if upstream {
		rep.Upstreams = probeEach(ctx, rep, "sink", name, plan.Upstreams, func(u Upstream) string { return u.Sink }, ProbeUpstream, &found)
		rep.Sparkplugs = probeEach(ctx, rep, "sink", name, plan.Sparkplugs, func(s Sparkplug) string { return s.Sink }, ProbeSparkplug, &found)
	} else {
		rep.Sources = probeEach(ctx, rep, "source", name, plan.Sources, func(s Source) string { return s.Source }, ProbeSource, &found)
	}
	rep.Finish()
	return rep, found
}

// probeEach probes the blocks (only the one called name when it is set)
// and returns their results; a block it cannot measure goes to rep.Errors.
func probeEach[B, R any](ctx context.Context, rep *Report, kind, name string, blocks []B, nameOf func(B) string,
	probe func(context.Context, B) (R, error), found *bool) []R {
	var out []R
	for _, b := range blocks {
		if name != "" && nameOf(b) != name {
			continue
		}
		*found = true
		res, err := probe(ctx, b)
		if err != nil {
			rep.Errors = append(rep.Errors, NamedError{Name: fmt.Sprintf("%s %q", kind, nameOf(b)), Error: err.Error()})
			continue
		}
		out = append(out, res)
	}
	return out
}
