package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slow delays a configuration's pipeline so that a run is still going when
// the test kills it after its first checkpoint.
func slow(tmpl string) string {
	return replaceAll(tmpl, "  to = [sink.file.out]\n}", "  to = [sink.file.out]\n  debug_delay_per_record = \"50us\"\n}")
}

// perWindowSliding is crashConfig with sliding windows kept as one state per
// window (trigger_count keeps that layout), slowed down.
var perWindowSliding = slow(replaceAll(crashConfig,
	`  window "tumbling" { size = "10s" }`, `  window "sliding" {
    size          = "30s"
    slide         = "10s"
    trigger_count = 1000000
  }`))

// checkpointOf runs tmpl in a new directory until its first checkpoint
// completes, SIGKILLs it there (state in flight), and returns the directory.
func checkpointOf(t *testing.T, tmpl string) string {
	t.Helper()
	dir := t.TempDir()
	writeReadings(t, filepath.Join(dir, "in.jsonl"), 1000, 100, 3)
	p := startEddy(t, "run", "-c", writeConfig(t, dir, tmpl))
	if !p.waitLog("checkpoint completed", 20*time.Second) {
		t.Fatal("no checkpoint completed within 20 s")
	}
	p.kill()
	return dir
}

// refusedThenDropped runs tmpl on dir's checkpoint: the binary must refuse
// to start, saying every one of refusal; with --allow-non-restored-state it
// must say dropped and run to the end with output.
func refusedThenDropped(t *testing.T, dir, tmpl string, dropped string, refusal ...string) {
	t.Helper()
	path := writeConfig(t, dir, tmpl)
	out, err := runEddy(t, "run", "-c", path)
	if err == nil {
		t.Fatalf("the agent started on a checkpoint whose state it would misread:\n%s", out)
	}
	for _, want := range append(refusal, "--allow-non-restored-state") {
		if !strings.Contains(out, want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, out)
		}
	}
	out, err = runEddy(t, "run", "-c", path, "--allow-non-restored-state")
	if err != nil {
		t.Fatalf("with --allow-non-restored-state: %v\n%s", err, out)
	}
	if !strings.Contains(out, dropped) {
		t.Fatalf("the run does not say %q:\n%s", dropped, out)
	}
	if n := len(committedRecords(t, filepath.Join(dir, "out"))); n == 0 {
		t.Fatalf("no output after dropping the state:\n%s", out)
	}
}

// TestRestore_ConfigurationChange: a checkpoint records what each
// pipeline's state depends on (window, key, aggregates, source) and its
// definition. A restart whose configuration changed a sliding window —
// once within the same state layout and once across layouts — cannot roll
// over (a sliding window open at any cut would hold readings of both
// sides), so it keeps running the previous definition and says why;
// --allow-non-restored-state drops that pipeline's state instead.
func TestRestore_ConfigurationChange(t *testing.T) {
	t.Run("window size", func(t *testing.T) {
		dir := checkpointOf(t, slow(slidingConfig))
		longer := strings.Replace(slow(slidingConfig), `size             = "30s"`, `size             = "60s"`, 1)
		keptThenDropped(t, dir, longer, 30_000)
	})
	t.Run("window layout", func(t *testing.T) {
		dir := checkpointOf(t, perWindowSliding)
		panes := strings.Replace(perWindowSliding, "    trigger_count = 1000000\n", "", 1)
		keptThenDropped(t, dir, panes, 30_000)
	})
}

// keptThenDropped runs tmpl to the end on a copy of dir's checkpoint: the
// run must keep the previous definition, whose windows last sizeMs, and
// say so; on another copy, with --allow-non-restored-state, it must say
// it dropped the state and run the new definition.
func keptThenDropped(t *testing.T, dir, tmpl string, sizeMs int64) {
	t.Helper()
	sizes := func(d string) map[int64]bool {
		out := map[int64]bool{}
		for _, line := range committedRecords(t, filepath.Join(d, "out")) {
			var r struct {
				Start int64 `json:"window_start_ms"`
				End   int64 `json:"window_end_ms"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			out[r.End-r.Start] = true
		}
		return out
	}
	kept := t.TempDir()
	copyTree(t, dir, kept, "data", "in.jsonl")
	out, err := runEddy(t, "run", "-c", writeConfig(t, kept, tmpl))
	if err != nil {
		t.Fatalf("the agent did not run on a change that cannot roll over: %v\n%s", err, out)
	}
	if !strings.Contains(out, `keeps running its previous definition`) || !strings.Contains(out, "which cannot roll over") {
		t.Fatalf("the run does not say it keeps the previous definition, and why:\n%s", out)
	}
	if got := sizes(kept); len(got) != 1 || !got[sizeMs] {
		t.Fatalf("windows of %v ms, want only the previous definition's %d ms", got, sizeMs)
	}
	dropped := t.TempDir()
	copyTree(t, dir, dropped, "data", "in.jsonl")
	out, err = runEddy(t, "run", "-c", writeConfig(t, dropped, tmpl), "--allow-non-restored-state")
	if err != nil {
		t.Fatalf("with --allow-non-restored-state: %v\n%s", err, out)
	}
	if !strings.Contains(out, "dropped the state of a pipeline whose configuration changed") {
		t.Fatalf("the run does not say it dropped the state:\n%s", out)
	}
	if n := len(committedRecords(t, filepath.Join(dropped, "out"))); n == 0 {
		t.Fatalf("no output after dropping the state:\n%s", out)
	}
}

// TestRestore_WindowLayoutOfEarlierBuild: a checkpoint of a build that
// recorded no state shape (simulated by removing it from the manifests)
// and kept sliding windows as one state per window is not read into panes:
// the window state's own name tells the layouts apart.
func TestRestore_WindowLayoutOfEarlierBuild(t *testing.T) {
	dir := checkpointOf(t, perWindowSliding)
	for _, m := range manifests(filepath.Join(dir, "data", "checkpoints")) {
		b, err := os.ReadFile(m.path)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		extra, _ := raw["extra"].(map[string]any)
		if _, ok := extra["shape/sums"]; !ok {
			t.Fatalf("%s records no state shape for pipeline sums", m.path)
		}
		delete(extra, "shape/sums")
		if b, err = json.Marshal(raw); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(m.path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	panes := strings.Replace(perWindowSliding, "    trigger_count = 1000000\n", "", 1)
	refusedThenDropped(t, dir, panes, "dropped window state of another layout",
		`pipeline "sums"'s windows as one state per window`, "keeps them in panes")
}
