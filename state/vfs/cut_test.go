package vfs

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"
)

// TestCutFS_InFlight: the power fails during the armed operation; a write
// in flight lands a random prefix of its bytes, another operation lands
// whole or not at all, and every operation after the cut fails.
func TestCutFS_InFlight(t *testing.T) {
	tests := []struct {
		name string
		op   func(c *CutFS, f File) error // the armed operation
		// got reads what the operation left: current or durable state.
		got  func(t *testing.T, m *MemFS) string
		want []string // every outcome, each seen in 200 runs
	}{
		{"write lands a prefix", func(_ *CutFS, f File) error {
			_, err := f.Write([]byte("cd"))
			return err
		}, func(t *testing.T, m *MemFS) string { return contents(t, m, "/d/a") }, []string{"ab", "abc", "abcd"}},
		{"sync lands or not", func(_ *CutFS, f File) error { return f.Sync() },
			func(t *testing.T, m *MemFS) string { return contents(t, m.CrashClone(CrashOptions{}), "/d/a") }, []string{"", "ab"}},
		{"rename lands or not", func(c *CutFS, _ File) error { return c.Rename("/d/a", "/d/b") },
			func(t *testing.T, m *MemFS) string { return contents(t, m, "/d/a") }, []string{"ab", "<missing>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			seen := map[string]bool{}
			for range 200 {
				m := NewCrashableMem()
				MkdirAllSynced(m, "/d", 0o755)
				write(t, m, "/d/a", "", true)
				m.SyncDir("/d")
				g, _ := m.OpenFile("/d/a", os.O_WRONLY|os.O_APPEND)
				g.Write([]byte("ab"))
				g.Close()
				c := NewCutFS(m, CutOptions{At: 1, Rand: rng})
				f, err := c.OpenFile("/d/a", os.O_RDWR|os.O_APPEND) // not a mutation
				if err != nil {
					t.Fatal(err)
				}
				if err := tt.op(c, f); !errors.Is(err, ErrPowerCut) {
					t.Fatalf("the armed operation returned %v, want ErrPowerCut", err)
				}
				if _, err := c.Stat("/d"); !errors.Is(err, ErrPowerCut) {
					t.Fatalf("Stat after the cut: %v, want ErrPowerCut", err)
				}
				if c.Image() == nil {
					t.Fatal("no image after the cut")
				}
				seen[tt.got(t, m)] = true
			}
			for _, w := range tt.want {
				if !seen[w] {
					t.Errorf("outcome %q never seen; seen %v", w, seen)
				}
				delete(seen, w)
			}
			if len(seen) > 0 {
				t.Errorf("outcomes outside the model: %v", seen)
			}
		})
	}
}
