package agent

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state"
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

// TestMemoryBudget_StateCacheShare checks that the caches holding a
// subtask's state in memory (the keyed stage's decoded per-key states and
// bbolt's write-back cache) together get exactly the subtask's share of
// state { cache }, never that share each, and how it is split.
func TestMemoryBudget_StateCacheShare(t *testing.T) {
	const (
		keyedOnly   = "  filter = changed(event.s)\n"
		windowOnly  = "  window \"tumbling\" { size = \"1m\" }\n  aggregate { n = count() }\n"
		keyedWindow = keyedOnly + windowOnly
	)
	tests := []struct {
		name        string
		stage       string
		parallelism int
		cache       string // state { cache }
		backend     string
		keyed       bool
		// The object cache's part of the share (the rest is bbolt's).
		objects func(share int64) int64
	}{
		{"keyed and window, parallelism 1", keyedWindow, 1, "24MiB", "bbolt", true, func(s int64) int64 { return s - s/2 }},
		{"keyed and window, parallelism 3", keyedWindow, 3, "24MiB", "bbolt", true, func(s int64) int64 { return s - s/2 }},
		{"keyed only, parallelism 1", keyedOnly, 1, "24MiB", "bbolt", true, func(s int64) int64 { return s - s/8 }},
		{"keyed only, parallelism 3", keyedOnly, 3, "24MiB", "bbolt", true, func(s int64) int64 { return s - s/8 }},
		{"keyed only, bbolt's floor", keyedOnly, 3, "2MiB", "bbolt", true, func(s int64) int64 { return s - s/2 }},
		{"window only, parallelism 1", windowOnly, 1, "24MiB", "bbolt", false, func(int64) int64 { return 0 }},
		{"window only, parallelism 3", windowOnly, 3, "24MiB", "bbolt", false, func(int64) int64 { return 0 }},
		{"keyed on the memory backend", keyedOnly, 3, "24MiB", "memory", true, func(s int64) int64 { return s }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := fmt.Sprintf(`
agent {
  data_dir    = "%%DATA%%"
  admin       = ""
  parallelism = %d
}
state {
  backend = %q
  cache   = %q
}
source "file" "in" {
  path = "in.jsonl"
  timestamp { field = "ts" }
}
sink "stdout" "out" {}
pipeline "p" {
  from = source.file.in
  key  = event.device
%s  to   = [sink.stdout.out]
}
`, tt.parallelism, tt.backend, tt.cache, tt.stage)
			a := mustBuildAgent(t, src, false)
			share := a.cfg.State.CacheBytes / int64(tt.parallelism)
			subtasks := a.flow.pipelines[0].subtasks
			if len(subtasks) != tt.parallelism {
				t.Fatalf("%d subtasks, want %d", len(subtasks), tt.parallelism)
			}
			for _, st := range subtasks {
				var objects, writeBack int64
				if k := st.task.Keyed(); k != nil {
					objects = int64(k.Operator().CacheBudget())
				} else if tt.keyed {
					t.Fatalf("subtask %d has no keyed stage", st.index)
				}
				if b, ok := st.backend.(*state.Bolt); ok {
					writeBack = int64(b.CacheBudget())
				} else if tt.backend == "bbolt" {
					t.Fatalf("subtask %d: backend %T, want bbolt", st.index, st.backend)
				}
				if objects+writeBack != share {
					t.Errorf("subtask %d: object cache %d + write-back cache %d = %d, want the share %d", st.index, objects, writeBack, objects+writeBack, share)
				}
				if want := tt.objects(share); objects != want {
					t.Errorf("subtask %d: object cache %d, want %d of the share %d", st.index, objects, want, share)
				}
			}
		})
	}
}
