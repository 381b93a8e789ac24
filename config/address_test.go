package config

import "testing"

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{in: "127.0.0.1:8787", want: true},
		{in: "127.1.2.3:1", want: true},
		{in: "[::1]:8787", want: true},
		{in: "localhost:8787", want: true},
		{in: ":8787", want: false},
		{in: "0.0.0.0:8787", want: false},
		{in: "[::]:8787", want: false},
		{in: "192.168.1.5:8787", want: false},
		{in: "gateway.local:8787", want: false},
		{in: "127.0.0.1", wantErr: true},
	}
	for _, tt := range tests {
		got, err := isLoopback(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("isLoopback(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestValidateBrokerURL(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"tcp://127.0.0.1:1883", true},
		{"ssl://iot.example.com:8883", true},
		{"ws://broker.local/mqtt", true},
		{"wss://broker.local:443/mqtt", true},
		{"tcp://127.0.0.1", false},
		{"mqtt://127.0.0.1:1883", false},
		{"127.0.0.1:1883", false},
		{"tcp://:1883", false},
		{"", false},
	}
	for _, tt := range tests {
		if err := validateBrokerURL(tt.in); (err == nil) != tt.ok {
			t.Errorf("validateBrokerURL(%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
	}
}

func TestValidateListen(t *testing.T) {
	for in, ok := range map[string]bool{"127.0.0.1:1883": true, ":1883": true, "127.0.0.1": false, "127.0.0.1:x": false, "h:": false} {
		if err := validateListen(in); (err == nil) != ok {
			t.Errorf("validateListen(%q) = %v, want ok %v", in, err, ok)
		}
	}
}
