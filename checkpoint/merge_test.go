package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-edge/eddy/state/vfs"
)

// readAll returns a snapshot file's entries as "bucket/key=value" or
// "bucket/key deleted".
func readAll(t *testing.T, s *Store, ref FileRef) []string {
	t.Helper()
	var out []string
	err := s.ReadSnapshot(ref, func(bucket, key, value []byte, deleted bool) error {
		if deleted {
			out = append(out, fmt.Sprintf("%s/%s deleted", bucket, key))
		} else {
			out = append(out, fmt.Sprintf("%s/%s=%s", bucket, key, value))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// snapFiles lists the store's snapshot and temp files.
func snapFiles(t *testing.T, s *Store) []string {
	t.Helper()
	names, err := os.ReadDir(filepath.Join(s.Dir(), "files"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		out = append(out, n.Name())
	}
	return out
}

// A merged chain holds what applying its files in order gives: the newest
// value of each key, deleted keys gone, in (bucket, key) order.
func TestStore_MergeChain(t *testing.T) {
	tests := []struct {
		name  string
		files [][]testEntry // the base, then the increments
		want  []string
	}{
		{"base alone", [][]testEntry{{{"a", "k1", "1", false}, {"b", "k1", "2", false}}}, []string{"a/k1=1", "b/k1=2"}},
		{
			"newest value wins, deletions dropped",
			[][]testEntry{
				{{"a", "k1", "1", false}, {"a", "k2", "1", false}, {"b", "k1", "1", false}},
				{{"a", "k1", "2", false}, {"a", "k3", "2", false}, {"b", "k1", "", true}},
				{{"a", "k1", "3", false}, {"a", "k2", "", true}, {"c", "k0", "3", false}},
			},
			[]string{"a/k1=3", "a/k3=2", "c/k0=3"},
		},
		{
			"deleted then put again",
			[][]testEntry{
				{{"a", "k", "1", false}},
				{{"a", "k", "", true}},
				{{"a", "k", "3", false}},
			},
			[]string{"a/k=3"},
		},
		{
			"a tombstone for a key the base never had",
			[][]testEntry{{{"a", "k1", "1", false}}, {{"a", "k0", "", true}, {"b", "x", "", true}}},
			[]string{"a/k1=1"},
		},
		{"everything deleted", [][]testEntry{{{"a", "k", "1", false}}, {{"a", "k", "", true}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenStore(vfs.Default, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var chain []FileRef
			for i, es := range tt.files {
				kind := KindIncremental
				if i == 0 {
					kind = KindFull
				}
				chain = append(chain, mustWriteSnapshot(t, s, "w/0", kind, uint64(i+1), es))
			}
			id := uint64(len(chain))
			ref, err := s.MergeChain(context.Background(), chain, id)
			if err != nil {
				t.Fatal(err)
			}
			if ref.Kind != KindFull || ref.Checkpoint != id || ref.Task != "w/0" || ref.Pipeline != "temp_1m" {
				t.Errorf("merged file %+v", ref)
			}
			if got := readAll(t, s, ref); !slices.Equal(got, tt.want) {
				t.Errorf("merged entries %q, want %q", got, tt.want)
			}
		})
	}
}

// A merge that cannot finish leaves the chain as it was and no file behind.
func TestStore_MergeChainFails(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, s *Store, chain []FileRef) []FileRef
		ctx    func() context.Context
		want   string
	}{
		{"file out of order", func(t *testing.T, s *Store, chain []FileRef) []FileRef {
			return append(chain, mustWriteSnapshot(t, s, "w/0", KindIncremental, 3, []testEntry{{"b", "k", "1", false}, {"a", "k", "1", false}}))
		}, nil, "is not after the one before it"},
		{"file damaged", func(t *testing.T, s *Store, chain []FileRef) []FileRef {
			path := filepath.Join(s.Dir(), chain[1].Name)
			b, _ := os.ReadFile(path)
			b[30] ^= 0xff
			os.WriteFile(path, b, 0o644)
			return chain
		}, nil, "checksum mismatch"},
		{"file missing", func(t *testing.T, s *Store, chain []FileRef) []FileRef {
			os.Remove(filepath.Join(s.Dir(), chain[1].Name))
			return chain
		}, nil, "missing"},
		{"no base", func(t *testing.T, s *Store, chain []FileRef) []FileRef { return chain[1:] }, nil, "starts with a full file"},
		{"cancelled", func(t *testing.T, s *Store, chain []FileRef) []FileRef { return chain }, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenStore(vfs.Default, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			chain := []FileRef{
				mustWriteSnapshot(t, s, "w/0", KindFull, 1, []testEntry{{"a", "k1", "1", false}, {"a", "k2", "1", false}}),
				mustWriteSnapshot(t, s, "w/0", KindIncremental, 2, []testEntry{{"a", "k1", "2", false}}),
			}
			chain = tt.damage(t, s, chain)
			before := snapFiles(t, s)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			_, err = s.MergeChain(ctx, chain, 3)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
			if after := snapFiles(t, s); !slices.Equal(after, before) {
				t.Errorf("files after the failed merge %q, before %q", after, before)
			}
		})
	}
}
