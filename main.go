// Command eddy is an edge stream agent: it reads sensor streams from MQTT,
// computes event-time windows over them and delivers the results upstream.
// This file only parses the command line; the agent package does the work.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/eddy-edge/eddy/agent"
)

// Stamped at build time: -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = "unknown"
)

const usage = `eddy — edge stream agent

Usage:
  eddy run -c FILE        run the agent
  eddy validate -c FILE   check a configuration; every problem as file:line:col
  eddy version            print version, commit and platform
  eddy help               this text

Run "eddy COMMAND -h" for a command's flags.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		return cmdRun(rest, stderr)
	case "validate":
		return cmdValidate(rest, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "eddy %s (commit %s) %s/%s %s\n", version, commit, runtime.GOOS, runtime.GOARCH, runtime.Version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "eddy: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: eddy %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := newFlags("run", "run -c FILE [--from CHECKPOINT] [--allow-non-restored-state]", stderr)
	path := fs.String("c", "eddy.hcl", "configuration file")
	from := fs.String("from", "", "checkpoint to restore: an id, a manifest path or a checkpoint directory (default: the newest that verifies)")
	allow := fs.Bool("allow-non-restored-state", false, "drop checkpointed state of pipelines the configuration no longer has")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := agent.Options{Version: version, Stderr: stderr, From: *from, AllowNonRestoredState: *allow}
	if err := agent.Run(ctx, *path, opts); err != nil {
		fmt.Fprintf(stderr, "eddy: %v\n", err)
		return 1
	}
	return 0
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", "validate -c FILE", stderr)
	path := fs.String("c", "eddy.hcl", "configuration file")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	report, ok := agent.Validate(*path)
	if report != "" {
		fmt.Fprintln(stderr, strings.TrimRight(report, "\n")) // errors and warnings
	}
	if !ok {
		return 1
	}
	fmt.Fprintf(stdout, "%s: configuration is valid\n", *path)
	return 0
}

func flagExit(err error) int {
	if err == flag.ErrHelp {
		return 0
	}
	return 2
}
