package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/eddy-edge/eddy/agent/probe"
)

// probeUnfit is the exit code of a probe that ran and found the
// configuration will lose or stall on its brokers (1 is an error: the
// probe could not measure; 2 a usage error).
const probeUnfit = 3

// cmdProbe is `eddy probe upstream|source -c FILE`: it measures the brokers
// of the configuration's MQTT sinks or sources and says which settings
// fit them (agent/probe).
func cmdProbe(args []string, stdout, stderr io.Writer) int {
	const usageLine = "Usage: eddy probe upstream -c FILE [--sink NAME] [--json] | eddy probe source -c FILE [--source NAME] [--json]"
	if len(args) == 0 || (args[0] != "upstream" && args[0] != "source") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, usageLine)
			return 0
		}
		fmt.Fprintln(stderr, usageLine)
		return 2
	}
	kind := args[0]
	synopsis := "probe upstream -c FILE [--sink NAME] [--json]"
	what := "sink"
	if kind == "source" {
		synopsis, what = "probe source -c FILE [--source NAME] [--json]", "source"
	}
	fs := newFlags("probe "+kind, synopsis, stderr)
	path := fs.String("c", "eddy.hcl", "configuration file")
	name := fs.String(what, "", "probe only the "+what+" of this name (default: every MQTT "+what+probeAlso(kind)+")")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if _, code, ok := parseCommand(fs, args[1:], 0); !ok {
		return code
	}
	plan, err := probe.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "eddy: probe: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, found := probe.Run(ctx, plan, kind == "upstream", *name)
	if !found {
		fmt.Fprintf(stderr, "eddy: probe: no MQTT %s%s%s on an external broker in %s\n", what, probeAlso(kind), quotedName(*name), *path)
		return 1
	}
	if *asJSON {
		_ = rep.WriteJSON(stdout)
	} else {
		rep.WriteText(stdout)
	}
	switch {
	case len(rep.Errors) > 0:
		return 1
	case !rep.Fit:
		return probeUnfit
	}
	return 0
}

func quotedName(n string) string {
	if n == "" {
		return ""
	}
	return fmt.Sprintf(" %q", n)
}

// probeAlso names what the probe covers besides MQTT blocks of its kind.
func probeAlso(kind string) string {
	if kind == "upstream" {
		return " and Sparkplug sink"
	}
	return ""
}
