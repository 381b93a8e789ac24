package stages

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/state"
)

// testClock is the machine's clock, with the wall clock synchronised.
type testClock struct{}

func (testClock) MonoMs() int64    { return time.Now().UnixMilli() }
func (testClock) WallMs() int64    { return time.Now().UnixMilli() }
func (testClock) WallSynced() bool { return true }

// loadTestConfig loads the configuration src, "%DATA%" in it replaced by
// a temporary directory.
func loadTestConfig(t *testing.T, src string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(src, "%DATA%", filepath.Join(dir, "data"))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatalf("config: %s", config.FormatDiagnostics(diags))
	}
	return cfg
}

// newTestPipeline builds cfg's first pipeline, each stateful subtask
// getting stateCache of state { cache }, its state in bbolt files of a
// temporary directory or in memory as cfg says. Nothing is connected or
// started.
func newTestPipeline(t *testing.T, cfg *config.Config, src string, stateCache int64) *Pipeline {
	t.Helper()
	pl, diags := Compile(cfg, cfg.Pipelines[0])
	if diags.HasErrors() {
		t.Fatal(config.FormatDiagnostics(diags))
	}
	dir := t.TempDir()
	var backends []state.Backend
	t.Cleanup(func() {
		for _, be := range backends {
			_ = be.Close()
		}
	})
	p, err := New(pl, Options{
		Source:       []byte(src),
		MaxKeyGroups: cfg.Agent.MaxKeyGroups,
		StateCache:   stateCache,
		BoltState:    cfg.State.Backend != "memory",
		OpenBackend: func(i int, cacheBytes int64) (state.Backend, error) {
			if cfg.State.Backend == "memory" {
				return state.NewMemory(), nil
			}
			be, err := state.OpenBolt(filepath.Join(dir, fmt.Sprintf("%d.db", i)), state.BoltOptions{CacheBytes: int(cacheBytes)})
			if err == nil {
				backends = append(backends, be)
			}
			return be, err
		},
		Metrics: NewMetrics(metrics.NewSet(), pl.Config().Name),
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:   testClock{},
		Fail:    func(err error) { t.Errorf("pipeline failed: %v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMemoryBudget_StateCacheShare checks that the caches holding a
// subtask's state in memory (the keyed stage's decoded per-key states and
// bbolt's write-back cache) together get exactly the subtask's share of
// state { cache }, never that share each, and how it is split.
func TestNew_StateCacheShare(t *testing.T) {
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
			cfg := loadTestConfig(t, src)
			share := cfg.State.CacheBytes / int64(tt.parallelism)
			subtasks := newTestPipeline(t, cfg, src, share).subtasks
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
