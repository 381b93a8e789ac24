package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is a whole probe run, as `eddy probe --json` prints it.
type Report struct {
	DeviceID  string            `json:"device_id"`
	Upstreams []*UpstreamResult `json:"upstreams,omitempty"`
	// Sparkplugs are the sink "sparkplug" blocks, probed with upstream.
	Sparkplugs []*SparkplugResult `json:"sparkplug_sinks,omitempty"`
	Sources    []*SourceResult    `json:"sources,omitempty"`
	Skipped    []string           `json:"skipped,omitempty"`
	// Errors are the blocks that could not be probed at all.
	Errors []NamedError `json:"errors,omitempty"`
	// Fit: every block probed and no finding is a Fail.
	Fit bool `json:"fit"`
}

// NamedError is a block the probe could not measure, with why.
type NamedError struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// Finish sets r.Fit from its results.
func (r *Report) Finish() {
	r.Fit = len(r.Errors) == 0
	for _, u := range r.Upstreams {
		r.Fit = r.Fit && Fit(u.Verdict.Findings)
	}
	for _, s := range r.Sources {
		r.Fit = r.Fit && Fit(s.Verdict.Findings)
	}
	for _, s := range r.Sparkplugs {
		r.Fit = r.Fit && Fit(s.Findings)
	}
}

// WriteJSON writes r as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// WriteText writes r for a person: per block what was measured, the
// findings, and the settings to use.
func (r *Report) WriteText(w io.Writer) {
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
	for _, u := range r.Upstreams {
		v := u.Verdict
		fmt.Fprintf(w, "sink %q: %s (first delivery %s after publishing; test messages on %s)\n", u.Sink, u.Broker, u.FirstDelivery.Round(10*time.Microsecond), u.ScratchTopic)
		fmt.Fprintf(w, "  QoS 1 bursts: %s\n", trialLine(u.Observed.QoS1))
		if len(u.Observed.QoS2) > 0 {
			fmt.Fprintf(w, "  QoS 2 bursts: %s\n", trialLine(u.Observed.QoS2))
		}
		fmt.Fprintf(w, "  payloads:     %s\n", sizeLine(u.Observed.Sizes))
		writeFindings(w, v.Findings)
		fmt.Fprintf(w, "  use:          qos = %d, max_inflight = %d", v.UseQoS, v.UseMaxInflight)
		if v.UseMaxPayload > 0 {
			fmt.Fprintf(w, ", max_payload = %d", v.UseMaxPayload)
		}
		fmt.Fprintln(w)
		for _, a := range v.Advice {
			fmt.Fprintf(w, "  broker:       %s\n", a)
		}
	}
	for _, s := range r.Sparkplugs {
		fmt.Fprintf(w, "sink %q (Sparkplug node %s): %s\n", s.Sink, s.Node, s.Broker)
		if a := s.Observed.Announced; a != nil {
			fmt.Fprintf(w, "  MQTT 5 CONNACK: receive maximum %d, maximum QoS %d, maximum packet size %d, retain available %v\n",
				a.ReceiveMaximum, a.MaximumQoS, a.MaximumPacketSize, !a.RetainUnavailable)
		}
		writeFindings(w, s.Findings)
	}
	for _, s := range r.Sources {
		o := s.Observed
		fmt.Fprintf(w, "source %q: %s (%d test messages to %s)\n", s.Source, s.Broker, o.Published, strings.Join(s.Topics, ", "))
		if o.Plain != nil {
			fmt.Fprintf(w, "  %-28s plain subscription  got %d\n", o.Plain.ClientID, o.Plain.Received)
		}
		for _, c := range o.Conns {
			kind := "plain subscription "
			if c.Shared {
				kind = "shared subscription"
			}
			fmt.Fprintf(w, "  %-28s %s got %d\n", c.ClientID, kind, c.Received)
		}
		writeFindings(w, s.Verdict.Findings)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "%s: error: %s\n", e.Name, e.Error)
	}
	switch {
	case len(r.Errors) > 0:
		fmt.Fprintln(w, "result: probe failed")
	case r.Fit:
		fmt.Fprintln(w, "result: the configuration fits the brokers")
	default:
		fmt.Fprintln(w, "result: the configuration will lose or stall on these brokers (see fail lines)")
	}
}

func writeFindings(w io.Writer, fs []Finding) {
	for _, f := range fs {
		fmt.Fprintf(w, "  %-5s %s\n", f.Level, f.Text)
	}
}

// trialLine is "1 2 5 10 20 ok; 50 (20 of 50) 35 (20 of 35) lost".
func trialLine(ts []Trial) string {
	var ok, bad []string
	for _, t := range ts {
		if t.Passed() {
			ok = append(ok, fmt.Sprint(t.Window))
			continue
		}
		s := fmt.Sprintf("%d (%d of %d arrived", t.Window, t.Arrived, t.Window)
		if t.Duplicates > 0 {
			s += fmt.Sprintf(", %d twice", t.Duplicates)
		}
		if t.Pubacks > 0 {
			s += ", PUBACK"
		}
		if t.Closed {
			s += ", closed"
		}
		bad = append(bad, s+")")
	}
	line := strings.Join(ok, " ") + " whole"
	if len(bad) > 0 {
		line += "; " + strings.Join(bad, " ")
	}
	return line
}

func sizeLine(ss []SizeTrial) string {
	var parts []string
	for _, s := range ss {
		st := "ok"
		switch {
		case s.Closed:
			st = "closed"
		case !s.Acked:
			st = "no ack"
		case !s.Arrived:
			st = "acked, lost"
		}
		parts = append(parts, fmt.Sprintf("%s %s", byteSize(s.Bytes), st))
	}
	return strings.Join(parts, ", ")
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
