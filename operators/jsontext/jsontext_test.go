package jsontext

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

func TestAppendEscaped(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "sensor-3", "sensor-3"},
		{"quote and backslash", `a"b\c`, `a\"b\\c`},
		{"short escapes", "\n\r\t\b\f", `\n\r\t\b\f`},
		{"other controls", "\x00\x01\x1f", `\u0000\u0001\u001f`},
		{"del is literal", "\x7f", "\x7f"},
		{"utf-8 copied", "Zürich 温度 🌡", "Zürich 温度 🌡"},
		{"invalid byte", "a\xffb", `a\ufffdb`},
		{"truncated rune", "\xe6\xb8", `\ufffd\ufffd`},
		{"line separators", "\u2028\u2029", `\u2028\u2029`},
		{"html untouched", "<a&b>", "<a&b>"},
	}
	for _, tt := range tests {
		if got, want := string(AppendString(nil, tt.in)), `"`+tt.want+`"`; got != want {
			t.Errorf("AppendString(%q) = %q, want %q", tt.in, got, want)
		}
		if got, want := string(AppendStringBytes(nil, []byte(tt.in))), `"`+tt.want+`"`; got != want {
			t.Errorf("AppendStringBytes(%q) = %q, want %q", tt.in, got, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendEscaped(nil, tt.in)); got != tt.want {
				t.Errorf("AppendEscaped(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := string(AppendEscapedBytes(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("AppendEscapedBytes(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppendNumber(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "-0"},
		{12, "12"},
		{21.43, "21.43"},
		{-7.5, "-7.5"},
		{0.1, "0.1"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{1e-10, "1e-10"},
		{1.5e-300, "1.5e-300"},
		{5e-324, "5e-324"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{9007199254740993, "9007199254740992"},
		{math.NaN(), "null"},
		{math.Inf(1), "null"},
		{math.Inf(-1), "null"},
	}
	for _, tt := range tests {
		got := string(AppendNumber(nil, tt.in))
		if got != tt.want {
			t.Errorf("AppendNumber(%v) = %s, want %s", tt.in, got, tt.want)
		}
		if math.IsNaN(tt.in) || math.IsInf(tt.in, 0) {
			continue
		}
		// Same text as encoding/json, and it parses back to the same value.
		if want, _ := json.Marshal(tt.in); got != string(want) {
			t.Errorf("AppendNumber(%v) = %s, encoding/json says %s", tt.in, got, want)
		}
		if back, err := strconv.ParseFloat(got, 64); err != nil || back != tt.in {
			t.Errorf("AppendNumber(%v) = %s parses back as %v, %v", tt.in, got, back, err)
		}
	}
}
