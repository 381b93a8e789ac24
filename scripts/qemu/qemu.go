// Package qemu runs Eddy's release binaries (scripts/build.sh, dist/) for
// other architectures under qemu-user, and its tests are the release tests
// that do so: every binary runs `version` and `validate` on every example
// config, the ARM binaries run a real job through a SIGKILL and a restore,
// and checkpoints cross between armv7 and amd64 (release_test.go).
//
// The machine that runs CI has no binfmt_misc, so a foreign binary is not
// executable by itself: Command starts qemu-aarch64 or qemu-arm with the
// binary as its argument. qemu-user emulates one process in one host
// process, so signals sent to the qemu process (SIGKILL, SIGTERM) reach the
// emulated program as on a device. Each target pins a CPU model of a real
// device, so an instruction the device lacks fails here too.
//
// The tests need the binaries: they skip unless EDDY_DIST names the
// directory scripts/build.sh wrote; scripts/test.sh builds dist/ and runs
// them. When EDDY_DIST is set, a missing qemu fails the tests (it does not
// skip), so a missing install step cannot pass for a green run.
package qemu

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Target is one release build: the binary scripts/build.sh names after it
// and the emulator that runs it on the amd64 build machine.
type Target struct {
	// Name is the binary's file name in dist/, e.g. "eddy-linux-armv7".
	Name string
	// GOARCH is what `eddy version` reports for it.
	GOARCH string
	// Emulator is the qemu-user command and CPU model, nil for the native
	// amd64 binary.
	Emulator []string
}

// The release targets. The CPU models are those of the boards Eddy aims at:
// cortex-a53 (Raspberry Pi 3, no LSE atomics), cortex-a7 (Pi 2, armv7
// gateways), arm1176 (Pi 1 and Zero, armv6).
var (
	AMD64 = Target{Name: "eddy-linux-amd64", GOARCH: "amd64"}
	ARM64 = Target{Name: "eddy-linux-arm64", GOARCH: "arm64", Emulator: []string{"qemu-aarch64", "-cpu", "cortex-a53"}}
	ARMv7 = Target{Name: "eddy-linux-armv7", GOARCH: "arm", Emulator: []string{"qemu-arm", "-cpu", "cortex-a7"}}
	ARMv6 = Target{Name: "eddy-linux-armv6", GOARCH: "arm", Emulator: []string{"qemu-arm", "-cpu", "arm1176"}}
)

// Targets lists every release target, native first.
var Targets = []Target{AMD64, ARM64, ARMv7, ARMv6}

// Check returns an error when the target's emulator is not installed.
func (t Target) Check() error {
	if t.Emulator == nil {
		return nil
	}
	if _, err := exec.LookPath(t.Emulator[0]); err != nil {
		return fmt.Errorf("qemu: %s needs %s (Debian package qemu-user; scripts/install-deps.sh installs it): %w", t.Name, t.Emulator[0], err)
	}
	return nil
}

// Command returns a command that runs the target's binary in dist with
// args, under its emulator when it has one. The caller sets Dir, Stdout and
// the rest as for any exec.Cmd.
func (t Target) Command(dist string, args ...string) *exec.Cmd {
	bin := filepath.Join(dist, t.Name)
	if t.Emulator == nil {
		return exec.Command(bin, args...)
	}
	argv := append(append(append([]string{}, t.Emulator[1:]...), bin), args...)
	return exec.Command(t.Emulator[0], argv...)
}

// String returns the target's name.
func (t Target) String() string { return t.Name }
