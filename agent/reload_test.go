package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reloadTestConfig has a tumbling pipeline "sums" on processing time and
// a sliding one "slides"; %SUMS% and %SLIDES% stand for their blocks.
const reloadTestConfig = `
agent {
  device_id = "reload"
  data_dir  = "%DATA%"
}
source "mqtt" "in" {
  broker = "tcp://127.0.0.1:1883"
  topics = ["t/#"]
}
source "file" "log" { path = "%DATA%/in.jsonl" }
sink "stdout" "out" {}
%SUMS%
%SLIDES%
`

const reloadSums = `pipeline "sums" {
  from = source.mqtt.in
  key  = event.device
  window "tumbling" {
    time = "processing"
    size = "%SIZE%"
  }
  aggregate { n = count() }
  to = [sink.stdout.out]
}`

const reloadSlides = `pipeline "slides" {
  from = source.mqtt.in
  window "sliding" {
    time  = "processing"
    size  = "10s"
    slide = "5s"
  }
  aggregate { n = count() }
  to = [sink.stdout.out]
}`

// TestReloadCompatible: a reload applies what a start would roll over,
// and refuses what a start refuses: a changed processing-time tumbling
// window rolls over; a removed pipeline that cannot roll out (a sliding
// window, or a file's pipeline on processing time) is refused, keeping
// its state as a start does, while a removed one that can roll out is
// accepted.
func TestReloadCompatible(t *testing.T) {
	dir := t.TempDir()
	load := func(t *testing.T, name, text string) loadedConfig {
		t.Helper()
		path := filepath.Join(dir, name+".hcl")
		text = strings.ReplaceAll(text, "%DATA%", dir)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		lc, err := loadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		return lc
	}
	config := func(sums, size, slides string) string {
		text := strings.NewReplacer("%SUMS%", sums, "%SLIDES%", slides).Replace(reloadTestConfig)
		return strings.ReplaceAll(text, "%SIZE%", size)
	}
	fileSums := strings.Replace(reloadSums, "source.mqtt.in", "source.file.log", 1)
	for _, c := range []struct {
		name      string
		old, next string
		want      string // "" accepted, else the start of the refusal
	}{
		{name: "unchanged", old: config(reloadSums, "10s", reloadSlides), next: config(reloadSums, "10s", reloadSlides)},
		{name: "a processing-time window's size changed: rolls over", old: config(reloadSums, "10s", reloadSlides), next: config(reloadSums, "20s", reloadSlides)},
		{name: "a tumbling pipeline removed: rolls out", old: config(reloadSums, "10s", reloadSlides), next: config("", "10s", reloadSlides)},
		{name: "a sliding pipeline removed", old: config(reloadSums, "10s", reloadSlides), next: config(reloadSums, "10s", ""),
			want: `pipeline "slides": removed from the configuration, which cannot roll out: its old window is sliding on processing time, and only tumbling windows roll over; its state stays`},
		{name: "a file's processing-time pipeline removed", old: config(fileSums, "10s", reloadSlides), next: config("", "10s", reloadSlides),
			want: `pipeline "sums": removed from the configuration, which cannot roll out: its windows are on processing time, and a file's readings get a new processing time at each read`},
		{name: "a tumbling window made sliding", old: config(reloadSums, "10s", ""), next: config(strings.Replace(reloadSlides, `"slides"`, `"sums"`, 1), "10s", ""),
			want: `pipeline "sums": window changed (kind tumbling → sliding, slide 0s → 5s), key changed (event.device → none), which cannot roll over: its new window is sliding`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := reloadCompatible(load(t, "old", c.old), load(t, "next", c.next))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
				t.Fatalf("got %v, want a refusal starting %q", err, c.want)
			}
		})
	}
}
