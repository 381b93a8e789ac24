package config

import (
	"reflect"
	"testing"
)

func TestTemplateNames(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"plain", nil},
		{"sites/${device_id}/${ key }", []string{"device_id", "key"}},
		{"open ${never", nil},
	}
	for _, tt := range tests {
		if got := templateNames(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("templateNames(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExpand_Allocs(t *testing.T) {
	vars := map[string]string{"device_id": "3f2a9c", "pipeline": "temp_1m", "key": "sensor-17"}
	allocs := testing.AllocsPerRun(100, func() { _ = Expand("sites/${device_id}/${pipeline}/${key}", vars) })
	if allocs > 1 {
		t.Errorf("Expand allocates %v times, want at most 1 (the result)", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = Expand("no/placeholders", vars) }); allocs != 0 {
		t.Errorf("Expand without placeholders allocates %v times", allocs)
	}
}

func BenchmarkExpand(b *testing.B) {
	vars := map[string]string{"device_id": "3f2a9c", "pipeline": "temp_1m", "key": "sensor-17"}
	b.ReportAllocs()
	for b.Loop() {
		_ = Expand("sites/${device_id}/${pipeline}/${key}", vars)
	}
}

func BenchmarkParse_Full(b *testing.B) {
	l := Loader{Env: noEnv, DeviceID: fixedDeviceID}
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := l.Load("../examples/full.hcl"); diags.HasErrors() {
			b.Fatal(FormatDiagnostics(diags))
		}
	}
}
