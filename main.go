// Command eddy is an edge stream agent: it reads sensor streams from MQTT,
// computes event-time windows over them and delivers the results upstream.
// This file only parses the command line; the agent package does the work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
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
  eddy run -c FILE [--from ID|PATH|s3://BUCKET/PREFIX[/ID]] [--allow-non-restored-state]
                                        run the agent (restoring the newest checkpoint)
  eddy validate -c FILE [--no-state] [--allow-non-restored-state]
                                        check a configuration; every problem as file:line:col; then
                                        what run would do with the checkpoints in its data_dir; exit 1
                                        when run would refuse to start
  eddy checkpoints ls -c FILE [--remote] list local (or uploaded) checkpoints
  eddy checkpoints show -c FILE ID      print one checkpoint's manifest
  eddy savepoint -c FILE                take a savepoint through the running agent
  eddy savepoint rm -c FILE ID          delete a local savepoint and its files
  eddy restore -c FILE --from s3://BUCKET/PREFIX[/ID]
                                        download and verify a checkpoint into data_dir
  eddy probe upstream -c FILE [--sink NAME] [--json]
  eddy probe source -c FILE [--source NAME] [--json]
                                        measure the brokers of MQTT sinks (sources) and say
                                        which settings fit them; exit 3 when these would lose or stall
  eddy id [-c FILE]                     print the device id (the configuration's data_dir's, with -c)
  eddy version                          print version, commit and platform
  eddy help                             this text

Flags may come before or after the arguments; "--" ends them.
Run "eddy COMMAND -h" for a command's flags.

Exit status: 0 success; 1 an error; 2 a usage error; 3 (eddy run) the input
ended but results were still undelivered upstream after drain_timeout
(they stay in the WAL; the next start delivers them).
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
	case "checkpoints":
		return cmdCheckpoints(rest, stdout, stderr)
	case "savepoint":
		return cmdSavepoint(rest, stdout, stderr)
	case "restore":
		return cmdRestore(rest, stdout, stderr)
	case "id":
		return cmdID(rest, stdout, stderr)
	case "probe":
		return cmdProbe(rest, stdout, stderr)
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

// parseFlags parses args with fs, flags before, between or after the
// positional arguments (Go's flag package stops at the first of those, and
// would leave later flags unread), and returns the positional arguments in
// order. "--" ends the flags: everything after it is positional.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseCommand parses the flags of a command that takes want positional
// arguments and returns them; a missing or extra one is a usage error.
func parseCommand(fs *flag.FlagSet, args []string, want int) ([]string, int, bool) {
	positional, err := parseFlags(fs, args)
	if err != nil {
		return nil, flagExit(err), false
	}
	if len(positional) != want {
		if len(positional) > want {
			fmt.Fprintf(fs.Output(), "eddy %s: unexpected argument %q\n", fs.Name(), positional[want])
		} else {
			fmt.Fprintf(fs.Output(), "eddy %s: missing argument\n", fs.Name())
		}
		fs.Usage()
		return nil, 2, false
	}
	return positional, 0, true
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := newFlags("run", "run -c FILE [--from ID|PATH|s3://BUCKET/PREFIX[/ID]] [--allow-non-restored-state]\n\n"+
		"Exit status 3: the input ended (files, simulators with max_readings) but results were still\n"+
		"undelivered upstream after drain_timeout; they stay in the WAL and the next start delivers them.", stderr)
	path := fs.String("c", "eddy.hcl", "configuration file")
	from := fs.String("from", "", "checkpoint to restore: an id, a manifest path, a checkpoint directory, or s3://BUCKET/PREFIX[/ID] "+
		"(the newest checkpoint under PREFIX, or checkpoint ID, downloaded and verified into data_dir first); default: the newest local one that verifies")
	allow := fs.Bool("allow-non-restored-state", false, "drop checkpointed state of pipelines the configuration no longer has or whose window, key, aggregates or source changed; "+
		"start empty when no checkpoint verifies although an ingest log no longer reaches its start")
	newID := fs.Bool("allow-new-device-id", false, "start under a device id other than the one data_dir was made under, and record it (a new S3 prefix)")
	if _, code, ok := parseCommand(fs, args, 0); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if strings.HasPrefix(*from, "s3://") {
		id, err := agent.RestoreFromS3(ctx, *path, *from, slog.New(slog.NewTextHandler(stderr, nil)),
			func(l string) { fmt.Fprintln(stderr, l) }, terminalBar(stderr))
		if err != nil {
			fmt.Fprintf(stderr, "eddy: restore: %v\n", err)
			return 1
		}
		*from = strconv.FormatUint(id, 10)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	opts := agent.Options{Version: version, Stderr: stderr, From: *from, AllowNonRestoredState: *allow, AllowNewDeviceID: *newID, Reload: reload}
	if err := agent.Run(ctx, *path, opts); err != nil {
		fmt.Fprintf(stderr, "eddy: %v\n", err)
		if errors.Is(err, agent.ErrUndelivered) {
			return exitUndelivered
		}
		return 1
	}
	return 0
}

// exitUndelivered is eddy run's exit status when the input ended with
// results still undelivered upstream after drain_timeout: a backfill
// script can tell its output is not all at the broker yet.
const exitUndelivered = 3

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", "validate -c FILE [--no-state] [--allow-non-restored-state]", stderr)
	path := fs.String("c", "eddy.hcl", "configuration file")
	noState := fs.Bool("no-state", false, "check the configuration only: read nothing in data_dir")
	allow := fs.Bool("allow-non-restored-state", false, "decide as eddy run with this flag would: drop state that would refuse the start")
	if _, code, ok := parseCommand(fs, args, 0); !ok {
		return code
	}
	report, ok := agent.Validate(*path)
	if report != "" {
		fmt.Fprintln(stderr, strings.TrimRight(report, "\n")) // errors and warnings
	}
	if !ok {
		return 1
	}
	fmt.Fprintf(stdout, "%s: configuration is valid\n", *path)
	if *noState {
		return 0
	}
	sc, err := agent.CheckState(*path, *allow)
	if err != nil {
		fmt.Fprintf(stderr, "eddy: %v\n", err)
		return 1
	}
	for _, l := range sc.Lines {
		fmt.Fprintln(stdout, l)
	}
	if sc.Refusal != nil {
		// The line eddy run would exit with, word for word.
		fmt.Fprintf(stderr, "eddy: %v\n", sc.Refusal)
		return 1
	}
	return 0
}

func flagExit(err error) int {
	if err == flag.ErrHelp {
		return 0
	}
	return 2
}

func cmdCheckpoints(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "show") {
		fmt.Fprintln(stderr, "Usage: eddy checkpoints ls -c FILE [--remote] | eddy checkpoints show -c FILE ID")
		return 2
	}
	out := func(l string) { fmt.Fprintln(stdout, l) }
	var err error
	if args[0] == "ls" {
		fs := newFlags("checkpoints ls", "checkpoints ls -c FILE [--remote]", stderr)
		path := fs.String("c", "eddy.hcl", "configuration file")
		remote := fs.Bool("remote", false, "list the checkpoints in the S3 bucket of the upload block")
		if _, code, ok := parseCommand(fs, args[1:], 0); !ok {
			return code
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err = agent.ListCheckpoints(ctx, *path, *remote, slog.New(slog.NewTextHandler(stderr, nil)), out)
	} else {
		fs := newFlags("checkpoints show", "checkpoints show -c FILE ID", stderr)
		path := fs.String("c", "eddy.hcl", "configuration file")
		positional, code, ok := parseCommand(fs, args[1:], 1)
		if !ok {
			return code
		}
		id, perr := strconv.ParseUint(positional[0], 10, 64)
		if perr != nil {
			fmt.Fprintf(stderr, "eddy: checkpoints show: %q is not a checkpoint id\n", positional[0])
			return 2
		}
		err = agent.ShowCheckpoint(*path, id, out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "eddy: %v\n", err)
		return 1
	}
	return 0
}

func cmdSavepoint(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "rm" {
		return cmdSavepointRm(args[1:], stdout, stderr)
	}
	fs := newFlags("savepoint", "savepoint -c FILE", stderr)
	path := fs.String("c", "eddy.hcl", "configuration file of the running agent")
	if _, code, ok := parseCommand(fs, args, 0); !ok {
		return code
	}
	id, err := agent.RequestSavepoint(context.Background(), *path)
	if err != nil {
		fmt.Fprintf(stderr, "eddy: savepoint: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "savepoint %d taken\n", id)
	return 0
}

func cmdRestore(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("restore", "restore -c FILE --from s3://BUCKET/PREFIX[/ID]", stderr)
	path := fs.String("c", "eddy.hcl", "configuration file (its upload block gives endpoint and credentials)")
	from := fs.String("from", "", "s3://BUCKET/PREFIX[/ID]: the newest checkpoint there, or checkpoint ID")
	if _, code, ok := parseCommand(fs, args, 0); !ok {
		return code
	}
	if *from == "" {
		fmt.Fprintln(stderr, "eddy: restore needs --from s3://BUCKET/PREFIX[/ID]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	id, err := agent.RestoreFromS3(ctx, *path, *from, slog.New(slog.NewTextHandler(stderr, nil)),
		func(l string) { fmt.Fprintln(stdout, l) }, terminalBar(stdout))
	if err != nil {
		fmt.Fprintf(stderr, "eddy: restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "checkpoint %d restored into data_dir; `eddy run` resumes from it\n", id)
	return 0
}

// terminalBar returns a progress-bar writer when w is a terminal, else nil
// (periodic lines instead, for logs).
func terminalBar(w io.Writer) func(string) {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return func(s string) { fmt.Fprint(w, s) }
}
