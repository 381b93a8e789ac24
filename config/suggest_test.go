package config

import "testing"

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"sensors", "sensors", 0},
		{"snesors", "sensors", 2},
		{"sensor", "sensors", 1},
		{"kitten", "sitting", 3},
		{"größe", "grösse", 2},
	}
	for _, tt := range tests {
		if got := levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		given      string
		candidates []string
		want       string
	}{
		{"sensor", []string{"cloud", "sensors"}, "sensors"},
		{"snesors", []string{"sensors"}, "sensors"},
		{"x", []string{"ack", "retain"}, ""},
		{"completely_different", []string{"sensors"}, ""},
		{"info", []string{"info"}, ""}, // an exact match is not a suggestion
		{"tumbling", []string{"tumbling", "sliding"}, ""},
		{"slidng", []string{"tumbling", "sliding", "session"}, "sliding"},
		{"warning", []string{"debug", "info", "warn", "error"}, "warn"},
	}
	for _, tt := range tests {
		if got := suggest(tt.given, tt.candidates); got != tt.want {
			t.Errorf("suggest(%q, %q) = %q, want %q", tt.given, tt.candidates, got, tt.want)
		}
	}
}
