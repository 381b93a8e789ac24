package introspect

import (
	"context"
	"fmt"
	"time"

	"github.com/eddy-edge/eddy/agent/admin"
	"github.com/eddy-edge/eddy/upload"
)

// Readiness defaults.
const (
	// DefaultMaxDisconnected is how long an MQTT source on an outside broker
	// may stay disconnected before the agent reports not ready. Not
	// configurable yet.
	DefaultMaxDisconnected = time.Minute
	// sourceSampleEvery is how often connection states are sampled to time
	// disconnections.
	sourceSampleEvery = time.Second
)

// sampleSources times disconnections until ctx ends: the connection
// callback keeps only the current state, so the agent notes when it first
// sees a source down.
func (v *View) sampleSources(ctx context.Context) {
	tk := time.NewTicker(sourceSampleEvery)
	defer tk.Stop()
	for {
		v.observeSources()
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// observeSources samples every tracked source's connection state now and
// returns the source reports with DisconnectedMs filled in.
func (v *View) observeSources() []admin.SourceReport {
	now := v.Now()
	srcs := v.sourceReports()
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range srcs {
		s := &srcs[i]
		if !s.Tracked {
			continue
		}
		if *s.Connected {
			delete(v.downSince, s.Name)
			continue
		}
		since, ok := v.downSince[s.Name]
		if !ok {
			since = now
			v.downSince[s.Name] = now
		}
		d := now.Sub(since).Milliseconds()
		s.DisconnectedMs = &d
	}
	return srcs
}

// readinessInput is everything readiness is decided on.
type readinessInput struct {
	checkpoints       bool // checkpoints are set up
	consecutiveFails  int
	tolerableFailures int
	sources           []admin.SourceReport // DisconnectedMs filled for tracked sources
	maxDisconnectedMs int64
	ingest            []admin.IngestReport
	wal               []admin.WALReport
	upload            *upload.Stats // nil without an upload block
	// diskFull is the "disk" check's detail (disk.Holds.Detail), "" while no
	// place waits for disk space.
	diskFull string
	// restartLimits: regions whose restart strategy gave up (the agent is
	// stopping) or that wait for their next restart.
	restartLimits []RestartLimit
}

// fullFraction of its max_disk makes an ingest log or WAL count as full:
// the next appends fail (ingest log) or block or drop (WAL).
const fullFraction = 0.95

func isFull(size, max int64) bool { return max > 0 && float64(size) >= fullFraction*float64(max) }

// evaluateReadiness decides readiness. Not ready when:
//   - checkpoints failed in a row at least tolerable_failures times (and at
//     least once): one more failure stops the agent;
//   - an MQTT source on an outside broker has been disconnected for
//     maxDisconnectedMs or longer;
//   - an ingest log or a WAL holds fullFraction of its max_disk or more;
//   - the disk is full ("disk_full": a checkpoint, ingest, state or sink
//     write failed with ENOSPC and space has not come back, or the
//     components together reached max_disk).
//   - a region's restart strategy gave up (the agent is stopping), or
//     the region is down waiting for its next restart;
//   - a pipeline runs its previous definition: its configuration changed
//     in a way that cannot roll over ("config/<pipeline>").
//
// Uploads that fail (uplink down, wrong credentials, missing bucket) are a
// warning with the last error, not unreadiness: the agent goes on
// processing and checkpointing locally, and a supervisor that
// restarted it would not bring the uplink back.
//
// A WAL whose sink does not report its size yet passes, with a detail
// that says so.
func evaluateReadiness(in readinessInput) admin.Readiness {
	r := admin.Readiness{Ready: true}
	add := func(name string, ok bool, detail string) {
		r.Checks = append(r.Checks, admin.Check{Name: name, OK: ok, Detail: detail})
		r.Ready = r.Ready && ok
	}
	switch {
	case !in.checkpoints:
		add("checkpoints", true, "not started")
	case in.consecutiveFails > 0 && in.consecutiveFails >= in.tolerableFailures:
		add("checkpoints", false, fmt.Sprintf("%d failed in a row (tolerable_failures = %d): the agent stops after one more",
			in.consecutiveFails, in.tolerableFailures))
	default:
		add("checkpoints", true, fmt.Sprintf("%d failed in a row (tolerable_failures = %d)", in.consecutiveFails, in.tolerableFailures))
	}
	if in.diskFull != "" {
		add("disk", false, in.diskFull)
	}
	for _, l := range in.restartLimits {
		name := "restarts/" + l.Pipelines
		if l.Check != "" {
			name = l.Check
		}
		add(name, false, l.Detail)
	}
	for _, s := range in.sources {
		if !s.Tracked {
			continue
		}
		switch {
		case *s.Connected:
			add("source/"+s.Name, true, "connected")
		case *s.DisconnectedMs >= in.maxDisconnectedMs:
			add("source/"+s.Name, false, fmt.Sprintf("disconnected for %v (limit %v)",
				time.Duration(*s.DisconnectedMs)*time.Millisecond, time.Duration(in.maxDisconnectedMs)*time.Millisecond))
		default:
			add("source/"+s.Name, true, fmt.Sprintf("disconnected for %v (limit %v)",
				time.Duration(*s.DisconnectedMs)*time.Millisecond, time.Duration(in.maxDisconnectedMs)*time.Millisecond))
		}
	}
	for _, l := range in.ingest {
		full := isFull(l.SizeBytes, l.MaxDiskBytes)
		add("ingest/"+l.Source, !full, fmt.Sprintf("%s of %s", admin.FormatBytes(l.SizeBytes), admin.FormatBytes(l.MaxDiskBytes)))
	}
	if u := in.upload; u != nil {
		detail := fmt.Sprintf("%d checkpoints waiting, recovery point lag %v", u.Pending, u.RecoveryPointLag.Round(time.Second))
		if u.LastError != "" {
			r.Checks = append(r.Checks, admin.Check{Name: "upload", OK: true, Warning: true,
				Detail: "failing, checkpoints stay local: " + u.LastError + "; " + detail})
		} else {
			add("upload", true, detail)
		}
	}
	for _, w := range in.wal {
		if w.Refusal != "" {
			detail := w.Refusal
			if w.BacklogMessages != nil {
				detail += fmt.Sprintf(" (%d results waiting in the WAL)", *w.BacklogMessages)
			}
			add("wal/"+w.Sink, false, detail)
			continue
		}
		if w.DiskBytes == nil {
			add("wal/"+w.Sink, true, "size not reported")
			continue
		}
		full := isFull(*w.DiskBytes, w.MaxDiskBytes)
		detail := fmt.Sprintf("%s of %s", admin.FormatBytes(*w.DiskBytes), admin.FormatBytes(w.MaxDiskBytes))
		if full {
			detail += " (when_full = " + w.WhenFull + ")"
		}
		add("wal/"+w.Sink, !full, detail)
	}
	return r
}

// Readiness implements admin.Agent: readiness now.
func (v *View) Readiness() admin.Readiness {
	ri := readinessInput{sources: v.observeSources(), maxDisconnectedMs: v.MaxDisconnected.Milliseconds(),
		ingest: v.run.Ingest(), wal: v.walReports(), restartLimits: v.run.RestartLimits()}
	ri.upload = v.run.UploadStats()
	if rep, ok := v.Checkpoints(); ok {
		ri.checkpoints = true
		ri.consecutiveFails, ri.tolerableFailures = rep.ConsecutiveFailures, rep.TolerableFailures
	}
	ri.diskFull = v.run.DiskFull()
	return evaluateReadiness(ri)
}
