// Command eddybench runs Eddy's benchmark suite (BENCHMARKS.md) and prints one
// table per benchmark. Each subcommand is one benchmark:
//
//	eddybench inprocess   (a) readings/s of filter, tumbling, sliding and session pipelines on JSON input, in process
//	eddybench e2e         (b) MQTT QoS 1 → windows → file sinks through the real binary and mosquitto, next to a raw paho subscriber
//	eddybench footprint   (c) CPU %, peak RSS and disk writes of the agent at a fixed 10,000 readings/s
//	eddybench checkpoint  (d) checkpoint duration and size against state size
//	eddybench restore     (e) restore time against state size
//	eddybench restore-s3  (e) restore time from a local S3 server (versitygw) against state size
//	eddybench wear        (f) bytes written and uploaded per hour at 1M keys, 1% changed per checkpoint, before and after compaction by size
//	eddybench shared      ingest over 1..N shared-subscription connections (connections = N)
//
// Benchmarks that need the binary build it from the repository (go build)
// into a temporary directory; those that need a broker start mosquitto on a
// free loopback port with the settings the README asks for. Run from the
// repository root (scripts/bench/*.sh do). Results go to stdout as a
// Markdown table, progress to stderr. Nothing here runs in CI, but go vet
// compiles it.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
)

type command struct {
	summary string
	run     func(args []string) error
}

var commands = map[string]command{
	"inprocess":  {"(a) in-process readings/s per pipeline shape", runInProcess},
	"e2e":        {"(b) end-to-end MQTT → windows → sinks vs raw paho", runE2E},
	"footprint":  {"(c) CPU, peak RSS, disk writes at a fixed rate", runFootprint},
	"checkpoint": {"(d) checkpoint duration and size vs state size", runCheckpoint},
	"restore":    {"(e) restore time vs state size", runRestore},
	"restore-s3": {"(e) restore time from a local S3 server vs state size", runRestoreS3},
	"shared":     {"ingest rate over N shared-subscription connections", runShared},
	"wear":       {"(f) bytes written and uploaded per hour vs changed bytes", runWear},
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: eddybench COMMAND [flags]   (eddybench COMMAND -h for flags)")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-11s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		usage()
		os.Exit(2)
	}
	if err := c.run(os.Args[2:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "eddybench:", err)
		os.Exit(1)
	}
}

// progress reports what a benchmark is doing, on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "# "+format+"\n", args...)
}
