package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Disk components: where the bytes under one disk budget go.
const (
	DiskIngest      = "ingest"      // the ingest logs of MQTT and simulator sources
	DiskWAL         = "wal"         // the write-ahead logs of exactly_once MQTT sinks and of Sparkplug sinks
	DiskCheckpoints = "checkpoints" // completed checkpoints and savepoints
	DiskState       = "state"       // the bbolt working files
	DiskSink        = "sink"        // file sinks' output
)

// DiskShare is the bound one component sets on its own disk use.
type DiskShare struct {
	// Component is DiskIngest, DiskWAL or DiskState.
	Component string
	// Name is the source (ingest) or sink (wal) it belongs to; "" for state.
	Name  string
	Bytes int64
	// Setting is where the bound is configured, as a user writes it.
	Setting string
}

// DiskShares lists the bounds the configuration sets on disk use: one ingest
// log per MQTT or simulator source a pipeline reads (ingest max_disk each),
// one WAL per exactly_once MQTT sink a pipeline writes to (its buffer
// max_disk) and one log per Sparkplug sink (its buffer max_disk), and the state files of the windowed pipelines together (state
// max_size) when the backend is bbolt. Checkpoints and file sinks have no
// bound of their own: they take what the budget leaves.
func (c *Config) DiskShares() []DiskShare {
	var out []DiskShare
	seen := map[string]bool{}
	logged := func(ref *SourceRef) {
		if ref == nil || ref.Source == nil || seen[ref.Source.Name] || (ref.Source.MQTT == nil && ref.Source.Simulator == nil) {
			return
		}
		seen[ref.Source.Name] = true
		out = append(out, DiskShare{Component: DiskIngest, Name: ref.Source.Name, Bytes: c.Ingest.MaxDiskBytes, Setting: "ingest { max_disk }"})
	}
	walled := func(ref *SinkRef) {
		if ref != nil && ref.Sink != nil && ref.Sink.Sparkplug != nil && !seen["sink."+ref.Sink.Name] {
			seen["sink."+ref.Sink.Name] = true
			out = append(out, DiskShare{Component: DiskWAL, Name: ref.Sink.Name, Bytes: ref.Sink.Sparkplug.Buffer.MaxDiskBytes,
				Setting: fmt.Sprintf("sink \"sparkplug\" %q { buffer { max_disk } }", ref.Sink.Name)})
			return
		}
		if ref == nil || ref.Sink == nil || seen["sink."+ref.Sink.Name] || ref.Sink.MQTT == nil || ref.Sink.MQTT.Delivery != ExactlyOnce {
			return
		}
		seen["sink."+ref.Sink.Name] = true
		out = append(out, DiskShare{Component: DiskWAL, Name: ref.Sink.Name, Bytes: ref.Sink.MQTT.Buffer.MaxDiskBytes,
			Setting: fmt.Sprintf("sink \"mqtt\" %q { buffer { max_disk } }", ref.Sink.Name)})
	}
	windowed := false
	for _, p := range c.Pipelines {
		logged(&p.From)
		logged(p.Control)
		for i := range p.To {
			walled(&p.To[i])
		}
		walled(p.LateOutput)
		walled(p.DeadLetter)
		windowed = windowed || p.Window != nil || p.Keyed()
	}
	if windowed && c.State.Backend == "bbolt" {
		out = append(out, DiskShare{Component: DiskState, Bytes: c.State.MaxSizeBytes, Setting: "state { max_size }"})
	}
	return out
}

// DiskSharesTotal is the sum of shares' bytes.
func DiskSharesTotal(shares []DiskShare) int64 {
	var n int64
	for _, s := range shares {
		n += s.Bytes
	}
	return n
}

// DescribeDiskShares lists shares for a message: each with its bytes and the
// setting that lowers it.
func DescribeDiskShares(shares []DiskShare) string {
	parts := make([]string, len(shares))
	for i, s := range shares {
		what := s.Component
		switch s.Component {
		case DiskIngest:
			what = fmt.Sprintf("ingest log of source %q", s.Name)
		case DiskWAL:
			what = fmt.Sprintf("WAL of sink %q", s.Name)
		}
		parts[i] = fmt.Sprintf("%s %s (%s)", what, FormatSize(s.Bytes), s.Setting)
	}
	return strings.Join(parts, ", ")
}

// checkDiskBudget reports, on max_disk, components' bounds that add up to
// more than an explicit max_disk. A derived budget is checked when the agent
// starts (it depends on the file system).
func (d *decoder) checkDiskBudget(cfg *Config) {
	budget := cfg.Agent.MaxDiskBytes
	if budget == 0 {
		return
	}
	shares := cfg.DiskShares()
	total := DiskSharesTotal(shares)
	if total <= budget {
		return
	}
	d.errorf(cfg.Agent.maxDiskRange, "Disk budget exceeded",
		"The components' own bounds add up to %s, more than max_disk = %q: %s. Checkpoints and file sinks need room besides. Lower the largest of these, or raise max_disk to at least %q.",
		FormatSize(total), FormatSize(budget), DescribeDiskShares(shares), FormatSize(total))
}

// FormatSize writes n as a configuration size: in the largest IEC unit that
// divides it exactly ("512MiB", "1536MiB"), else in bytes.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		bytes  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
