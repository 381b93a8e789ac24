package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/eddy-edge/eddy/agent"
)

// cmdSavepointRm is `eddy savepoint rm -c FILE ID`: savepoints are kept
// until removed by hand, up to checkpoint { max_savepoints }.
func cmdSavepointRm(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("savepoint rm", "savepoint rm -c FILE ID", stderr)
	path := fs.String("c", "eddy.hcl", "configuration file (its data_dir holds the savepoint)")
	args, code, ok := parseCommand(fs, args, 1)
	if !ok {
		return code
	}
	id, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		fmt.Fprintf(stderr, "eddy: savepoint rm: %q is not a checkpoint id (see eddy checkpoints ls)\n", args[0])
		return 2
	}
	n, err := agent.RemoveSavepoint(*path, id)
	if err != nil {
		fmt.Fprintf(stderr, "eddy: savepoint rm: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "savepoint %d removed (%d files)\n", id, n)
	return 0
}
