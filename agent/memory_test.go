package agent

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/eddy-edge/eddy/config"
)

func TestMemoryBudget(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name                 string
		memoryLimit, cache   int64
		device               int64
		known                bool
		wantLimit, wantCache int64
		wantDerived          bool
	}{
		{"512 MiB device", 0, 0, gib / 2, true, 128 << 20, 16 << 20, true},
		{"8 GiB device", 0, 0, 8 * gib, true, 256 << 20, 32 << 20, true},
		{"unknown device", 0, 0, 0, false, 256 << 20, 32 << 20, true},
		{"configured limit sizes the cache", 64 << 20, 0, 8 * gib, true, 64 << 20, 8 << 20, false},
		{"configured cache", 0, 48 << 20, gib / 2, true, 128 << 20, 48 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Agent: config.Agent{MemoryLimit: tt.memoryLimit}, State: config.State{CacheBytes: tt.cache}}
			b := newMemoryBudget(cfg, func() (int64, bool) { return tt.device, tt.known })
			if b.goLimit != tt.wantLimit || b.stateCache != tt.wantCache || b.derived != tt.wantDerived {
				t.Fatalf("budget %+v, want limit %d cache %d derived %v", b, tt.wantLimit, tt.wantCache, tt.wantDerived)
			}
		})
	}
}

// apply sets the runtime's limit; GOMEMLIMIT wins over a derived one only.
func TestMemoryBudget_Apply(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("GOMEMLIMIT", "")
	memoryBudget{goLimit: 200 << 20, derived: true}.apply(log)
	if got := debug.SetMemoryLimit(-1); got != 200<<20 {
		t.Fatalf("limit %d, want %d", got, 200<<20)
	}
	t.Setenv("GOMEMLIMIT", "300MiB")
	memoryBudget{goLimit: 100 << 20, derived: true}.apply(log)
	if got := debug.SetMemoryLimit(-1); got != 200<<20 {
		t.Fatalf("derived limit overrode GOMEMLIMIT: %d", got)
	}
	memoryBudget{goLimit: 100 << 20}.apply(log)
	if got := debug.SetMemoryLimit(-1); got != 100<<20 {
		t.Fatalf("configured limit %d, want %d", got, 100<<20)
	}
}
