package identity

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/config"
)

func TestDecideDeviceID(t *testing.T) {
	const derived = "derived0derived0derived0derived0"
	tests := []struct {
		name       string
		f          deviceIDFacts
		want       string
		wantRecord bool
		wantErr    bool
	}{
		{"fresh data_dir takes the derived default", deviceIDFacts{configured: derived}, derived, true, false},
		{"fresh data_dir takes a configured id", deviceIDFacts{configured: "gw-1"}, "gw-1", true, false},
		{"recorded id, same again", deviceIDFacts{configured: derived, stored: derived}, derived, false, false},
		{"configured id changed", deviceIDFacts{configured: "gw-2", stored: "gw-1"}, "", false, true},
		{"data_dir of another machine", deviceIDFacts{configured: derived, stored: "other000other000other000other000"}, "", false, true},
		{"configured id changed, allowed", deviceIDFacts{configured: "gw-2", stored: "gw-1", allowNew: true}, "gw-2", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, record, err := decideDeviceID(tt.f)
			if (err != nil) != tt.wantErr || id != tt.want || record != tt.wantRecord {
				t.Fatalf("= %q, %v, %v; want %q, %v, error %v", id, record, err, tt.want, tt.wantRecord, tt.wantErr)
			}
			if err != nil && (!errors.Is(err, errDeviceIDChanged) || !strings.Contains(err.Error(), "--allow-new-device-id")) {
				t.Fatalf("error %v does not name the way out", err)
			}
		})
	}
}

// TestSettleDeviceID: the id is recorded in data_dir at the first start
// and stays across restarts; another configured id is refused until
// allowed, which records it.
func TestSettleDeviceID(t *testing.T) {
	dir := t.TempDir()
	cfg := func(id string) *config.Config {
		return &config.Config{Agent: config.Agent{DataDir: dir, DeviceID: id}}
	}
	c := cfg("gw-1")
	if err := SettleDeviceID(c, false, true); err != nil || c.Agent.DeviceID != "gw-1" {
		t.Fatalf("first start: %q, %v", c.Agent.DeviceID, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, DeviceIDFile)); strings.TrimSpace(string(b)) != "gw-1" {
		t.Fatalf("recorded %q", b)
	}
	if err := SettleDeviceID(cfg("gw-1"), false, true); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := SettleDeviceID(cfg("gw-2"), false, true); !errors.Is(err, errDeviceIDChanged) {
		t.Fatalf("changed id: %v, want refused", err)
	}
	if err := SettleDeviceID(cfg("gw-2"), true, true); err != nil {
		t.Fatalf("changed id, allowed: %v", err)
	}
	if err := SettleDeviceID(cfg("gw-2"), false, true); err != nil {
		t.Fatalf("restart after adopting the new id: %v", err)
	}
}
