package config

import "testing"

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "4096", want: 4096},
		{in: "512B", want: 512},
		{in: "512KiB", want: 512 << 10},
		{in: "64MiB", want: 64 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "2TiB", want: 2 << 40},
		{in: "100MB", want: 100_000_000},
		{in: "10KB", want: 10_000},
		{in: "1.5GiB", want: 3 << 29},
		{in: "0.5KiB", want: 512},
		{in: "64 MiB", want: 64 << 20},
		{in: "", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "-1MiB", wantErr: true},
		{in: "64mb", wantErr: true},
		{in: "1/2MiB", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "lots", wantErr: true},
		{in: "99999999999TiB", wantErr: true},
		{in: "9223372036854775807", want: 1<<63 - 1},
		{in: "9223372036854775808", wantErr: true},
		{in: "0x10MiB", wantErr: true},
		{in: "1p3", wantErr: true},
		{in: "0b11", wantErr: true},
		{in: "1_000", wantErr: true},
		{in: "+5", wantErr: true},
		{in: "1.2.3", wantErr: true},
		{in: ".", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseSize(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && got != tt.want {
			t.Errorf("parseSize(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
