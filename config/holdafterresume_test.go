package config

import (
	"strings"
	"testing"
	"time"
)

// watermark { hold_after_resume } is a duration on a source a broker
// serves, and refused with its position on a file source.
func TestParse_HoldAfterResume(t *testing.T) {
	tests := []struct {
		name, src string
		want      time.Duration
		pos, err  string // "line:col" and a substring of the error, or ""
	}{
		{name: "mqtt", want: 5 * time.Second,
			src: strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]
  timestamp { field = "ts" }
  watermark { hold_after_resume = "5s" }`, 1)},
		{name: "default none",
			src: strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]
  timestamp { field = "ts" }
  watermark { max_out_of_orderness = "1s" }`, 1)},
		{name: "file source", pos: "4:35", err: "Unsupported argument; hold_after_resume holds the watermark after an MQTT broker resumed",
			src: `source "file" "f" {
  path = "x.jsonl"
  timestamp { field = "ts" }
  watermark { hold_after_resume = "5s" }
}
sink "stdout" "out" {}
pipeline "p" {
  from = source.file.f
  to   = [sink.stdout.out]
}
`},
		{name: "needs a unit", pos: "5:35", err: `Invalid duration; "hold_after_resume" needs a unit`,
			src: strings.Replace(base, `topics = ["a/b"]`, `topics = ["a/b"]
  timestamp { field = "ts" }
  watermark { hold_after_resume = 5 }`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == "" {
				cfg := mustParse(t, tt.src, noEnv)
				if got := cfg.Sources[0].Watermark.HoldAfterResume; got != tt.want {
					t.Fatalf("hold_after_resume %v, want %v", got, tt.want)
				}
				return
			}
			_, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(tt.src), "test.hcl")
			out := FormatDiagnostics(diags)
			if !strings.Contains(out, "test.hcl:"+tt.pos+": error: "+tt.err) {
				t.Fatalf("want %q at %s, got:\n%s", tt.err, tt.pos, out)
			}
		})
	}
}
