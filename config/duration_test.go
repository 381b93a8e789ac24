package config

import (
	"errors"
	"testing"
	"time"
)

// parseDuration refuses a negative duration (errNegativeDuration);
// parseSignedDuration, for window offsets, takes one minus sign.
func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		signed  bool // parseSignedDuration
		want    time.Duration
		wantErr bool
		neg     bool
	}{
		{in: "0", want: 0},
		{in: "0s", want: 0},
		{in: "500ms", want: 500 * time.Millisecond},
		{in: "2s", want: 2 * time.Second},
		{in: "1m", want: time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "1d", want: 24 * time.Hour},
		{in: "2d12h", want: 60 * time.Hour},
		{in: "-0s", want: 0},
		{in: "-1s", neg: true, wantErr: true},
		{in: "-1d", neg: true, wantErr: true},
		{in: "", wantErr: true},
		{in: "5", wantErr: true},
		{in: "2 s", wantErr: true},
		{in: "1.5d", wantErr: true},
		{in: "1h1d", wantErr: true},
		{in: "1d-1h", wantErr: true},
		{in: "d", wantErr: true},
		{in: "99999999d", wantErr: true},
		{in: "two seconds", wantErr: true},
		{in: "8h", signed: true, want: 8 * time.Hour},
		{in: "-8h", signed: true, want: -8 * time.Hour},
		{in: "-0s", signed: true, want: 0},
		{in: "-1d12h", signed: true, want: -36 * time.Hour},
		{in: "-500ms", signed: true, want: -500 * time.Millisecond},
		{in: "-", signed: true, wantErr: true},
		{in: "--8h", signed: true, wantErr: true},
		{in: "-+8h", signed: true, wantErr: true},
		{in: "-8", signed: true, wantErr: true},
		{in: "-1h-1d", signed: true, wantErr: true},
	}
	for _, tt := range tests {
		parse, name := parseDuration, "parseDuration"
		if tt.signed {
			parse, name = parseSignedDuration, "parseSignedDuration"
		}
		got, err := parse(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s(%q) error = %v, wantErr %v", name, tt.in, err, tt.wantErr)
			continue
		}
		if tt.neg != errors.Is(err, errNegativeDuration) {
			t.Errorf("%s(%q) error = %v, want negative: %v", name, tt.in, err, tt.neg)
		}
		if err == nil && got != tt.want {
			t.Errorf("%s(%q) = %v, want %v", name, tt.in, got, tt.want)
		}
	}
}
