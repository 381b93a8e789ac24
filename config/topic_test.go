package config

import "testing"

func TestValidateTopicFilter(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"sensors/+/telemetry", true},
		{"sensors/#", true},
		{"#", true},
		{"+", true},
		{"+/+", true},
		{"/", true},
		{"a/b/c", true},
		{"", false},
		{"a/#/b", false},
		{"a#", false},
		{"a/b#", false},
		{"a/+b", false},
		{"a++", false},
		{"a/\x00", false},
		{"$share/eddy/sensors/#", true},
		{"$share/eddy/+", true},
		{"$share/eddy", false},
		{"$share//sensors/#", false},
		{"$share/ed+dy/sensors/#", false},
		{"$share/#/sensors", false},
	}
	for _, tt := range tests {
		if err := validateTopicFilter(tt.in); (err == nil) != tt.ok {
			t.Errorf("validateTopicFilter(%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
	}
}

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"sites/dev1/temp/k", true},
		{"a", true},
		{"", false},
		{"a/+", false},
		{"a/#", false},
	}
	for _, tt := range tests {
		if err := validateTopicName(tt.in); (err == nil) != tt.ok {
			t.Errorf("validateTopicName(%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
	}
}
