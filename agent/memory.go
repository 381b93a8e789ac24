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
	stateCache int64 // shared by the subtasks with state (stateShare)
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

// stateShare divides a subtask's share of state { cache } between the two
// caches that hold its state in memory, so that together they hold no more
// than the share (both count in eddy_state_memory_bytes): objects for the
// keyed stage's decoded per-key states (keyed: the subtask has per-key
// functions), writeBack for bbolt's write-back cache (bolt: the state is
// on bbolt; the memory backend has no cache).
//
// The decoded objects are the hot copy: a reading of a resident key costs
// no backend access, and a key that does not fit costs a Get, a decode, an
// encode and a Put per reading. bbolt's cache holds encoded copies: of keys
// read on a miss (for a resident key, a second copy nobody reads until the
// key leaves the object cache) and of the writes not yet in the file: the
// states written at each checkpoint and by evictions, spilled readings,
// timers; when it is full they are written back in batched transactions,
// once per checkpoint rather than per reading. So without a window the
// objects get seven eighths (100,000 keys of one changed() at the default
// 32 MiB) and bbolt an eighth, at least 1 MiB (at most half the share) so a
// checkpoint's writes are not written back a few entries at a time. With a
// window bbolt also takes the window store's evicted windows, checkpoint
// writes and timers (the window store's own decoded cache is apart, see
// docs/state.md), so the two get half each.
func stateShare(share int64, keyed, window, bolt bool) (objects, writeBack int64) {
	switch {
	case !bolt:
		return share, 0
	case !keyed:
		return 0, share
	case window:
		writeBack = share / 2
	default:
		writeBack = max(share/8, min(share/2, minWriteBackCache))
	}
	return share - writeBack, writeBack
}

// minWriteBackCache is the least of a keyed subtask's share that bbolt's
// write-back cache keeps (about 5,000 small per-key states).
const minWriteBackCache = 1 << 20
