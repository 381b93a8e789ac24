package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint/checkpointtest"
)

// twoPipelines is crashConfig, slowed, with a second stateful pipeline
// beside "sums", so that one can be removed or renamed.
var twoPipelines = slow(crashConfig) + `
sink "file" "peaks" {
  path     = "%DIR%/peaks"
  delivery = "exactly_once"
}
pipeline "maxes" {
  from = source.file.in
  key  = event.device
  window "tumbling" { size = "10s" }
  aggregate { top = max(event.v) }
  to = [sink.file.peaks]
}
`

// TestCLI_ValidateState: on a device with checkpoints, `eddy validate`
// says per pipeline what `eddy run` then does with the state, word for
// word: the same exit status, and on a refusal the same error line; and it
// leaves data_dir as it found it. --no-state skips the check.
func TestCLI_ValidateState(t *testing.T) {
	base := checkpointOf(t, twoPipelines)
	id, taken := newestManifest(t, filepath.Join(base, "data", "checkpoints"))
	header := fmt.Sprintf("state: eddy run restores checkpoint %d (%s) from %%DATA%%:", id, taken)
	// A change that cannot roll over keeps the previous definition
	// running; the others roll over (TestRollover_ChangedPipelineExactlyOnce).
	for _, tc := range []struct {
		name  string
		tmpl  string
		lines []string // validate's stdout after "configuration is valid" and the header
		// refusal is the error line of validate and of run; "" when run starts.
		refusal string
	}{
		{"unchanged", twoPipelines, []string{`  pipeline "sums": restore`, `  pipeline "maxes": restore`}, ""},
		{"change the window to one that cannot roll over", strings.Replace(twoPipelines, `window "tumbling" { size = "10s" }`, `window "sliding" {
    size  = "20s"
    slide = "10s"
  }`, 1),
			[]string{`  pipeline "sums": keep running its previous definition: window changed (kind tumbling → sliding, size 10s → 20s, slide 0s → 10s), ` +
				`which cannot roll over: its new window is sliding on event time, and only tumbling windows roll over`, `  pipeline "maxes": restore`}, ""},
		{"add a pipeline", twoPipelines + `
pipeline "counts" {
  from = source.file.in
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.file.peaks]
}
`, []string{`  pipeline "sums": restore`, `  pipeline "maxes": restore`, `  pipeline "counts": start empty (new pipeline)`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyTree(t, base, dir, "data", "in.jsonl")
			path := writeConfig(t, dir, tc.tmpl)
			before := treeState(t, filepath.Join(dir, "data"))

			stdout, stderr, code := runSplit(t, "validate", "-c", path)
			want := append([]string{path + ": configuration is valid", strings.ReplaceAll(header, "%DATA%", filepath.Join(dir, "data"))}, tc.lines...)
			if got := strings.Split(strings.TrimRight(stdout, "\n"), "\n"); !slices.Equal(got, want) {
				t.Errorf("validate printed\n%s\nwant\n%s", stdout, strings.Join(want, "\n"))
			}
			if after := treeState(t, filepath.Join(dir, "data")); !slices.Equal(before, after) {
				t.Errorf("validate changed data_dir:\nbefore %v\nafter  %v", before, after)
			}
			if tc.refusal == "" {
				if code != 0 || stderr != "" {
					t.Fatalf("validate: exit %d, stderr %q; want 0 and nothing", code, stderr)
				}
				p := startEddy(t, "run", "-c", path)
				if !p.waitLog(fmt.Sprintf(`msg="restored checkpoint" id=%d `, id), 20*time.Second) {
					t.Fatalf("run did not restore checkpoint %d:\n%s", id, p.output())
				}
				p.kill()
				return
			}
			if code != 1 || strings.TrimRight(stderr, "\n") != tc.refusal {
				t.Fatalf("validate: exit %d, stderr\n%s\nwant exit 1 and\n%s", code, stderr, tc.refusal)
			}
			out, err := runEddy(t, "run", "-c", path)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("run: %v, want exit 1:\n%s", err, out)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if last := lines[len(lines)-1]; last != tc.refusal {
				t.Fatalf("run's last line\n%s\nis not validate's\n%s", last, tc.refusal)
			}
		})
	}

	// A checkpoint of a build that did not record pipeline definitions
	// cannot run the old one: a change is refused as before, by validate
	// and run in the same words.
	t.Run("checkpoint without definitions", func(t *testing.T) {
		dir := t.TempDir()
		copyTree(t, base, dir, "data", "in.jsonl")
		checkpointtest.StripExtra(t, filepath.Join(dir, "data"), "definition/", "maxtime/")
		path := writeConfig(t, dir, strings.Replace(twoPipelines, "    max = max(event.v)\n", "    max = max(event.v)\n    min = min(event.v)\n", 1))
		refusal := fmt.Sprintf("eddy: agent: checkpoint %d holds pipeline \"sums\"'s state, and aggregates changed (min added), which cannot roll over: "+
			"the checkpoint was written by a build that does not record pipeline definitions, so the old one cannot run (the next checkpoint of this build records it); "+
			"restore it with the configuration that wrote it, or start with --allow-non-restored-state to drop that state", id)
		_, stderr, code := runSplit(t, "validate", "-c", path)
		if code != 1 || strings.TrimRight(stderr, "\n") != refusal {
			t.Fatalf("validate: exit %d, stderr\n%s\nwant exit 1 and\n%s", code, stderr, refusal)
		}
		out, err := runEddy(t, "run", "-c", path)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("run: %v, want exit 1:\n%s", err, out)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if last := lines[len(lines)-1]; last != refusal {
			t.Fatalf("run's last line\n%s\nis not validate's\n%s", last, refusal)
		}
	})

	// A removed pipeline whose windows cannot roll out keeps running its
	// recorded definition, state and all, as a changed one does: the
	// start never fails for it.
	t.Run("remove a pipeline that cannot roll out", func(t *testing.T) {
		sliding := strings.Replace(twoPipelines, `  window "tumbling" { size = "10s" }
  aggregate { top`, `  window "sliding" {
    size  = "20s"
    slide = "10s"
  }
  aggregate { top`, 1)
		base := checkpointOf(t, sliding)
		id, _ := newestManifest(t, filepath.Join(base, "data", "checkpoints"))
		dir := t.TempDir()
		copyTree(t, base, dir, "data", "in.jsonl")
		path := writeConfig(t, dir, sliding[:strings.Index(sliding, `pipeline "maxes"`)]) // its sink stays
		const line = `pipeline "maxes": keep running its previous definition: removed from the configuration, which cannot roll over: its old window is sliding on event time, and only tumbling windows roll over`
		stdout, stderr, code := runSplit(t, "validate", "-c", path)
		// (stderr warns that sink.file.peaks is unused now)
		if code != 0 || strings.Contains(stderr, "error") || !strings.Contains(stdout, "\n  "+line+"\n") {
			t.Fatalf("validate: exit %d, stderr %q, stdout\n%s\nwant exit 0 and the line\n  %s", code, stderr, stdout, line)
		}
		p := startEddy(t, "run", "-c", path)
		if !p.waitLog(fmt.Sprintf(`msg="restored checkpoint" id=%d `, id), 20*time.Second) ||
			!p.waitLog(`configuration change not applied: pipeline \"maxes\" keeps running its previous definition`, 20*time.Second) {
			t.Fatalf("run did not restore checkpoint %d keeping maxes:\n%s", id, p.output())
		}
		if !p.waitLog("checkpoint completed", 20*time.Second) {
			t.Fatalf("run took no checkpoint:\n%s", p.output())
		}
		ms := manifests(filepath.Join(dir, "data", "checkpoints"))
		m, err := os.ReadFile(ms[len(ms)-1].path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(m), "pipeline/maxes/") {
			t.Fatalf("the checkpoint after the start no longer holds maxes' state:\n%s", m)
		}
		p.kill()
	})

	t.Run("no-state", func(t *testing.T) {
		dir := t.TempDir()
		copyTree(t, base, dir, "data", "in.jsonl")
		path := writeConfig(t, dir, slow(crashConfig))
		stdout, stderr, code := runSplit(t, "validate", "--no-state", "-c", path)
		if code != 0 || stdout != path+": configuration is valid\n" || stderr != "" {
			t.Fatalf("validate --no-state: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
		}
		stdout, _, code = runSplit(t, "validate", "--allow-non-restored-state", "-c", path)
		if code != 0 || !strings.HasSuffix(stdout, "\n  pipeline \"maxes\": drop its state (--allow-non-restored-state): the configuration no longer has it\n") {
			t.Fatalf("validate --allow-non-restored-state: exit %d\n%s", code, stdout)
		}
	})
}

// newestManifest returns the id and the time (RFC 3339, UTC) of the newest
// manifest under root.
func newestManifest(t *testing.T, root string) (uint64, string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(root, "manifests", "*.json"))
	if len(names) == 0 {
		t.Fatal("no checkpoint")
	}
	slices.Sort(names)
	b, err := os.ReadFile(names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ID   uint64
		Time time.Time
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.ID, m.Time.UTC().Format(time.RFC3339)
}

// copyTree copies the named entries of dir from into dir to.
func copyTree(t *testing.T, from, to string, names ...string) {
	t.Helper()
	for _, n := range names {
		if out, err := exec.Command("cp", "-a", filepath.Join(from, n), filepath.Join(to, n)).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", n, err, out)
		}
	}
}

// treeState lists every file and directory under root with its size,
// mode and modification time.
func treeState(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d %v %d", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runSplit runs the eddy binary with args to its end and returns its
// stdout, its stderr and its exit status.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(eddyBin, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}
