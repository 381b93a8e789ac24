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
		for _, u := range plan.Upstreams {
			if name != "" && u.Sink != name {
				continue
			}
			found = true
			res, err := ProbeUpstream(ctx, u)
			if err != nil {
				rep.Errors = append(rep.Errors, NamedError{Name: fmt.Sprintf("sink %q", u.Sink), Error: err.Error()})
				continue
			}
			rep.Upstreams = append(rep.Upstreams, res)
		}
		for _, s := range plan.Sparkplugs {
			if name != "" && s.Sink != name {
				continue
			}
			found = true
			res, err := ProbeSparkplug(ctx, s)
			if err != nil {
				rep.Errors = append(rep.Errors, NamedError{Name: fmt.Sprintf("sink %q", s.Sink), Error: err.Error()})
				continue
			}
			rep.Sparkplugs = append(rep.Sparkplugs, res)
		}
	} else {
		for _, s := range plan.Sources {
			if name != "" && s.Source != name {
				continue
			}
			found = true
			res, err := ProbeSource(ctx, s)
			if err != nil {
				rep.Errors = append(rep.Errors, NamedError{Name: fmt.Sprintf("source %q", s.Source), Error: err.Error()})
				continue
			}
			rep.Sources = append(rep.Sources, res)
		}
	}
	rep.Finish()
	return rep, found
}
