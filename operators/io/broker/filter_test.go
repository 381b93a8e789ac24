package broker

import "testing"

func TestMatchFilter(t *testing.T) {
	tests := []struct {
		filter, topic string
		want          bool
	}{
		{"a/b/c", "a/b/c", true},
		{"a/b/c", "a/b", false},
		{"a/b", "a/b/c", false},
		{"a/+/c", "a/x/c", true},
		{"a/+/c", "a//c", true},
		{"a/+", "a/x/c", false},
		{"+", "a", true},
		{"+", "a/b", false},
		{"+/+", "/a", true},
		{"#", "a/b/c", true},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"a/#", "ab", false},
		{"a/b/#", "a", false},
		{"sensors/+/telemetry", "sensors/sensor-3/telemetry", true},
		{"sensors/+/telemetry", "sensors/sensor-3/status", false},
		{"#", "$SYS/broker/uptime", false},
		{"+/broker/uptime", "$SYS/broker/uptime", false},
		{"$SYS/#", "$SYS/broker/uptime", true},
		{"a/b", "a/bc", false},
	}
	for _, tt := range tests {
		if got := matchFilter(tt.filter, tt.topic); got != tt.want {
			t.Errorf("matchFilter(%q, %q) = %v, want %v", tt.filter, tt.topic, got, tt.want)
		}
	}
}

func TestValidateFilter(t *testing.T) {
	tests := []struct {
		filter string
		ok     bool
	}{
		{"a/b", true},
		{"#", true},
		{"a/+/b/#", true},
		{"", false},
		{"a/#/b", false},
		{"a/b#", false},
		{"a+/b", false},
	}
	for _, tt := range tests {
		if err := ValidateFilter(tt.filter); (err == nil) != tt.ok {
			t.Errorf("ValidateFilter(%q) = %v, want ok=%v", tt.filter, err, tt.ok)
		}
	}
}

func TestMatchFilter_NoAllocs(t *testing.T) {
	allocs := testing.AllocsPerRun(1000, func() {
		matchFilter("sensors/+/telemetry/#", "sensors/sensor-3/telemetry/a/b")
	})
	if allocs != 0 {
		t.Fatalf("matchFilter allocates %v times per call", allocs)
	}
}
