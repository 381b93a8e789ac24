package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_FlagsAnywhere: every command reads its flags before, between or
// after its arguments; an argument or flag a command does not take is a
// usage error (exit 2), never ignored. The configuration path given with -c
// shows in the error of reading it, which proves the flag was read.
func TestCLI_FlagsAnywhere(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "missing.hcl")
	for _, tc := range []struct {
		args []string
		exit int
		want string // in the combined output
	}{
		{[]string{"run", "-c", cfg}, 1, cfg},
		{[]string{"run", "--allow-non-restored-state", "-c", cfg}, 1, cfg},
		{[]string{"run", "stray", "-c", cfg}, 2, `eddy run: unexpected argument "stray"`},
		{[]string{"validate", "-c", cfg}, 1, cfg},
		{[]string{"validate", "-c", cfg, "stray"}, 2, `eddy validate: unexpected argument "stray"`},
		{[]string{"validate", "--", "-c", cfg}, 2, `eddy validate: unexpected argument "-c"`},
		{[]string{"checkpoints", "ls", "-c", cfg}, 1, cfg},
		{[]string{"checkpoints", "ls", "-c", cfg, "--remote"}, 1, cfg},
		{[]string{"checkpoints", "ls", "7", "-c", cfg}, 2, `eddy checkpoints ls: unexpected argument "7"`},
		{[]string{"checkpoints", "show", "-c", cfg, "5"}, 1, cfg},
		{[]string{"checkpoints", "show", "5", "-c", cfg}, 1, cfg},
		{[]string{"checkpoints", "show", "5", "6", "-c", cfg}, 2, `eddy checkpoints show: unexpected argument "6"`},
		{[]string{"checkpoints", "show", "-c", cfg}, 2, "eddy checkpoints show: missing argument"},
		{[]string{"checkpoints", "show", "5", "--remote", "-c", cfg}, 2, "flag provided but not defined: -remote"},
		{[]string{"checkpoints", "show", "-c", cfg, "--", "-5"}, 2, `"-5" is not a checkpoint id`},
		{[]string{"savepoint", "-c", cfg}, 1, cfg},
		{[]string{"savepoint", "now", "-c", cfg}, 2, `eddy savepoint: unexpected argument "now"`},
		{[]string{"restore", "--from", "s3://bucket/prefix", "-c", cfg}, 1, cfg},
		{[]string{"restore", "-c", cfg, "--from", "s3://bucket/prefix"}, 1, cfg},
		{[]string{"restore", "s3://bucket/prefix", "-c", cfg}, 2, `eddy restore: unexpected argument "s3://bucket/prefix"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := exec.Command(eddyBin, tc.args...).CombinedOutput()
			exit := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tc.exit || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %d, want %d with %q in the output:\n%s", exit, tc.exit, tc.want, out)
			}
		})
	}
}

// TestCLI_RunHelpListsFromForms: `run -h` names every form --from takes.
func TestCLI_RunHelpListsFromForms(t *testing.T) {
	out, err := exec.Command(eddyBin, "run", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("run -h: %v\n%s", err, out)
	}
	for _, form := range []string{"an id", "a manifest path", "a checkpoint directory", "s3://BUCKET/PREFIX[/ID]"} {
		if !strings.Contains(string(out), form) {
			t.Errorf("run -h does not name %q:\n%s", form, out)
		}
	}
}
