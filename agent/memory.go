package agent

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/eddy-edge/eddy/agent/devicemem"
	"github.com/eddy-edge/eddy/config"
)

// memoryBudget is what the agent may hold in memory: the Go runtime's soft
// limit and the state stores' write-back cache, from the configuration or,
// where it names none, from the device (devicemem).
type memoryBudget struct {
	goLimit    int64
	stateCache int64 // shared by the subtasks with state (stages.Options.StateCache)
	derived    bool  // goLimit came from the device
}

func newMemoryBudget(cfg *config.Config, deviceTotal func() (int64, bool)) memoryBudget {
	b := memoryBudget{goLimit: cfg.Agent.MemoryLimit, stateCache: cfg.State.CacheBytes}
	if b.goLimit == 0 {
		b.goLimit = devicemem.DefaultGoLimit(deviceTotal())
		b.derived = true
	}
	if b.stateCache == 0 {
		b.stateCache = devicemem.DefaultStateCache(b.goLimit)
	}
	return b
}

// apply sets the Go memory limit, so the garbage collector works harder as
// the heap nears it (returning idle memory before the device swaps) rather
// than letting the heap double between collections. GOMEMLIMIT in the
// environment wins over a limit derived from the device, as Go's own
// setting, but not over one the configuration names.
func (b memoryBudget) apply(log *slog.Logger) {
	if env := os.Getenv("GOMEMLIMIT"); env != "" && b.derived {
		log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", env, "state_cache_bytes", b.stateCache)
		return
	}
	debug.SetMemoryLimit(b.goLimit)
	log.Info("memory limit", "bytes", b.goLimit, "from_device", b.derived, "state_cache_bytes", b.stateCache)
}
