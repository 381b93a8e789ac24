package config

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAppSpecificID: the derived id is systemd's app-specific id for
// Eddy's app id (a vector computed by systemd-id128), stable, different for
// two machine ids, in the machine id's format, and no machine id goes
// through unchanged.
func TestAppSpecificID(t *testing.T) {
	const machine = "3d1219c7c4c5404aaa1f6d2a48adfda4"
	got, err := AppSpecificID(machine)
	if err != nil {
		t.Fatal(err)
	}
	// systemd-id128 machine-id --app-specific=d873836666997ac96e25a4e521c75e78
	// on a machine with that machine id.
	if want := "950299a9751c418fb8f63c981857098e"; got != want {
		t.Fatalf("AppSpecificID = %s, want systemd's %s", got, want)
	}
	again, _ := AppSpecificID(machine)
	other, _ := AppSpecificID("0123456789abcdef0123456789abcdef")
	if again != got || other == got || len(other) != 32 || strings.ToLower(other) != other {
		t.Fatalf("ids %s %s %s", got, again, other)
	}
	for _, bad := range []string{"", "xyz", "3d1219c7c4c5404aaa1f6d2a48adfd"} {
		if _, err := AppSpecificID(bad); err == nil {
			t.Errorf("AppSpecificID(%q) succeeded", bad)
		}
	}
}

// TestMachineDeviceID_MatchesSystemd compares with systemd-id128 on this
// machine, where it and /etc/machine-id exist.
func TestMachineDeviceID_MatchesSystemd(t *testing.T) {
	if _, err := os.Stat(machineIDPath); err != nil {
		t.Skip("no /etc/machine-id here")
	}
	out, err := exec.Command("systemd-id128", "machine-id", "--app-specific="+deviceAppID).Output()
	if err != nil {
		t.Skipf("systemd-id128: %v", err)
	}
	got, err := MachineDeviceID()
	if err != nil || got != strings.TrimSpace(string(out)) {
		t.Fatalf("MachineDeviceID = %s, %v; systemd-id128 says %s", got, err, out)
	}
}
