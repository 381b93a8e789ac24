package config

import (
	"strings"
	"testing"
	"time"
)

const fileSinkBase = `source "file" "f" { path = "x" }
pipeline "p" {
  from = source.file.f
  to   = [sink.file.out]
}
sink "file" "out" {
  path = "out"
`

func TestParse_FileSinkRotate(t *testing.T) {
	for _, tt := range []struct {
		name     string
		attrs    string
		maxFiles int
		maxAge   time.Duration
		diag     string // "line:col: error: " prefix and a substring; "" = none
	}{
		{name: "default keeps everything", attrs: `delivery = "exactly_once"`},
		{name: "both bounds", attrs: "delivery = \"exactly_once\"\nrotate {\nmax_files = 100\nmax_age = \"7d\"\n}", maxFiles: 100, maxAge: 7 * 24 * time.Hour},
		{name: "max_files only", attrs: "delivery = \"exactly_once\"\nrotate {\nmax_files = 3\n}", maxFiles: 3},
		{name: "max_files zero", attrs: "delivery = \"exactly_once\"\nrotate {\nmax_files = 0\n}",
			diag: `test.hcl:10:13: error: Value out of range; "max_files" must be`},
		{name: "at_least_once", attrs: "rotate {\nmax_files = 3\n}",
			diag: `test.hcl:8:1: error: Block does not apply; rotate bounds the part files of an exactly_once file sink`},
		{name: "rotate_size on exactly_once points to rotate", attrs: "delivery = \"exactly_once\"\nrotate_size = \"1MiB\"",
			diag: `test.hcl:9:15: error: Argument does not apply; An exactly_once file sink writes one part file per checkpoint into the directory "path"; it does not rotate by size. Bound its parts with a rotate { max_files, max_age } block.`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := fileSinkBase + tt.attrs + "\n}\n"
			cfg, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(src), "test.hcl")
			out := FormatDiagnostics(diags)
			if tt.diag != "" {
				if !strings.Contains(out, tt.diag) {
					t.Fatalf("no %q in:\n%s", tt.diag, out)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatalf("Parse:\n%s", out)
			}
			f := cfg.Sinks[0].File
			if f.MaxFiles != tt.maxFiles || f.MaxAge != tt.maxAge {
				t.Errorf("max_files %d, max_age %v; want %d, %v", f.MaxFiles, f.MaxAge, tt.maxFiles, tt.maxAge)
			}
		})
	}
}
