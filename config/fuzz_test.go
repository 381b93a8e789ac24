package config

import "testing"

// FuzzParse checks that no input panics the decoder and that every error
// carries a position.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte("agent { admin = \"0.0.0.0:1\" }"))
	f.Add([]byte("pipeline \"p\" { window \"count\" { count = 3 } aggregate { q = percentile(event.x, 2) } }"))
	l := Loader{Env: noEnv, DeviceID: fixedDeviceID}
	f.Fuzz(func(t *testing.T, src []byte) {
		_, diags := l.Parse(src, "fuzz.hcl")
		for _, d := range diags {
			if d.Subject == nil {
				t.Fatalf("diagnostic without subject: %s", FormatDiagnostics(diags))
			}
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"1d", "2d12h", "-1s", "500ms", "1.5h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseDuration(s); err == nil && d < 0 {
			t.Fatalf("parseDuration(%q) = %v", s, d)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64MiB", "1.5GiB", "100MB", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseSize(s); err == nil && n < 0 {
			t.Fatalf("parseSize(%q) = %d", s, n)
		}
	})
}
