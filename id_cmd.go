package main

import (
	"fmt"
	"io"

	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/config"
)

// cmdID is `eddy id [-c FILE]`: the device id, which names the device's S3
// prefix and client ids. Without -c, the default derived from this
// machine; with -c, the one the agent of FILE runs under (its data_dir's
// recorded id, or what it would record).
func cmdID(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("id", "id [-c FILE]", stderr)
	path := fs.String("c", "", "configuration file (default: none, the machine's derived id)")
	if _, code, ok := parseCommand(fs, args, 0); !ok {
		return code
	}
	var id string
	var err error
	if *path == "" {
		id, err = config.MachineDeviceID()
	} else {
		id, err = identity.DeviceID(*path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "eddy: id: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, id)
	return 0
}
