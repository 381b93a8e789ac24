package config

import (
	"strings"
	"testing"
)

// format = "sparkplug_b" reads an MQTT source's Sparkplug messages, with
// event time from the readings' "timestamp"; what does not fit it is
// refused (or warned about) at its position.
func TestParse_SparkplugSource(t *testing.T) {
	sp := func(lines string) string {
		return strings.Replace(base, `topics = ["a/b"]`, `topics = ["spBv1.0/plant1/#"]
  format = "sparkplug_b"`+lines, 1)
	}
	tests := []struct {
		name, src string
		rebirth   bool
		pos, diag string // "line:col" and a substring of the diagnostic, or ""
	}{
		{name: "defaults", src: sp("")},
		{name: "request_rebirth", src: sp("\n  request_rebirth = true"), rebirth: true},
		{name: "watermark", src: sp("\n  watermark { max_out_of_orderness = \"2s\" }")},
		{name: "rebirth without sparkplug", pos: "4:21",
			diag: `error: Argument does not apply; "request_rebirth" asks Sparkplug edge nodes for their births; this source's format is "json", set format = "sparkplug_b".`,
			src:  strings.Replace(base, `topics = ["a/b"]`, "topics = [\"a/b\"]\n  request_rebirth = true", 1)},
		{name: "timestamp block", pos: "5:3", diag: `error: Unexpected timestamp block; Sparkplug B readings carry their event time in the field "timestamp"`,
			src: sp("\n  timestamp { field = \"ts\" }")},
		{name: "shared subscription", pos: "5:17", diag: "error: Argument does not apply; Sparkplug B readings are checked in seq order",
			src: sp("\n  connections = 2")},
		{name: "topic outside the namespace", pos: "3:12", diag: `warning: Topic outside the Sparkplug namespace; topics[0] = "a/b" matches no Sparkplug B topic`,
			src: strings.Replace(base, `topics = ["a/b"]`, "topics = [\"a/b\"]\n  format = \"sparkplug_b\"", 1)},
		{name: "file source", pos: "3:12", diag: `error: Unsupported format; "sparkplug_b" reads Sparkplug B messages from an MQTT broker`,
			src: `source "file" "f" {
  path   = "x.bin"
  format = "sparkplug_b"
}
sink "stdout" "out" {}
pipeline "p" {
  from = source.file.f
  to   = [sink.stdout.out]
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.diag == "" {
				cfg := mustParse(t, tt.src, noEnv)
				s := cfg.Sources[0]
				if s.Format != FormatSparkplugB || s.Timestamp == nil || *s.Timestamp != SparkplugTimestamp || s.MQTT.RequestRebirth != tt.rebirth {
					t.Fatalf("format %q, timestamp %+v, request_rebirth %v", s.Format, s.Timestamp, s.MQTT.RequestRebirth)
				}
				return
			}
			_, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(tt.src), "test.hcl")
			out := FormatDiagnostics(diags)
			if !strings.Contains(out, "test.hcl:"+tt.pos+": "+tt.diag) {
				t.Fatalf("want %q at %s, got:\n%s", tt.diag, tt.pos, out)
			}
		})
	}
}
