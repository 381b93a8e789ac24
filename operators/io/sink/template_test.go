package sink

import (
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/operators/record"
)

func TestParseTemplate_Errors(t *testing.T) {
	tests := []struct {
		name, in string
		allowed  []string
		wantErr  string
	}{
		{"unknown variable", "a/${device}/b", nil, "unknown variable ${device}"},
		{"not allowed here", "eddy/${key}/", []string{"device_id"}, "unknown variable ${key} (allowed: device_id)"},
		{"unterminated", "a/${pipeline", nil, `unterminated "${" at offset 2`},
		{"empty name", "a/${}", nil, "unknown variable ${}"},
		{"unsupported allowed name", "x", []string{"hostname"}, `template variable "hostname" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTemplate(tt.in, tt.allowed)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "sink: ") {
				t.Fatalf("ParseTemplate(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestTemplate_Append(t *testing.T) {
	r := &record.Result{Pipeline: "temp_1m", Key: []byte("sensor-3"), Start: 1000, End: 61000}
	tests := []struct {
		name, tmpl string
		deviceID   string
		r          *record.Result
		want       string
	}{
		{"all variables", "sites/${device_id}/${pipeline}/${key}/${window_start}-${window_end}", "gw-1", r, "sites/gw-1/temp_1m/sensor-3/1000-61000"},
		{"literal only", "fixed/topic", "gw-1", r, "fixed/topic"},
		{"empty", "", "gw-1", r, ""},
		{"adjacent variables", "${pipeline}${key}", "gw", r, "temp_1msensor-3"},
		{"dollar escapes", "a$$b/$x/${key}$", "gw", r, "a$b/$x/sensor-3$"},
		{"value made one segment", "s/${device_id}/${key}", "gw/+", &record.Result{Key: []byte("a/b+c#d\x00e\xffé")}, "s/gw__/a_b_c_d_e_é"},
		{"nil result renders empty", "s/${device_id}/${pipeline}/${key}/${window_start}", "gw", nil, "s/gw///"},
		{"negative times", "${window_start}/${window_end}", "gw", &record.Result{Start: -60000, End: -1}, "-60000/-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := ParseTemplate(tt.tmpl, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(tm.Append([]byte(nil), tt.deviceID, tt.r)); got != tt.want {
				t.Errorf("Append = %q, want %q", got, tt.want)
			}
			if tm.String() != tt.tmpl {
				t.Errorf("String = %q, want %q", tm.String(), tt.tmpl)
			}
		})
	}
}

func TestTemplate_Append_ZeroAllocs(t *testing.T) {
	tm, err := ParseTemplate("sites/${device_id}/${pipeline}/${key}", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := benchResult()
	buf := make([]byte, 0, 256)
	if allocs := testing.AllocsPerRun(1000, func() { buf = tm.Append(buf[:0], "gw-1", r) }); allocs != 0 {
		t.Fatalf("Template.Append: %v allocs per run, want 0", allocs)
	}
}
