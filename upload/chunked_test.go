package upload

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// smallChunks makes c chunk files above 2 MiB in 1 MiB chunks, so tests stay
// fast; the layout is the same at 16/8 MiB.
func smallChunks(c *Client) *Client {
	c.chunkSize, c.largeFile = 1<<20, 2<<20
	return c
}

func TestClient_Chunked_RoundTripAndResume(t *testing.T) {
	env := newEnv(t)
	var cancelAfter atomic.Int64
	var cancel context.CancelFunc
	c := smallChunks(env.client(t, func(o *Options) {
		o.EncryptionKey = bytes.Repeat([]byte{9}, 32)
		o.Progress = func(p Progress) {
			if n := cancelAfter.Load(); n > 0 && p.Op == "upload" && p.Done >= n && cancel != nil {
				cancel()
			}
		}
	}))
	dir := t.TempDir()
	data := append(stateEntries(3<<20, 4), randomBytes(t, 2<<20+12345)...) // 6 chunks
	src, sum := writeFile(t, dir, "big", data)
	name := sum + ".snap"

	// Interrupt after two chunks.
	cancelAfter.Store(2 << 20)
	ctx, cf := context.WithCancel(ctxT(t))
	cancel = cf
	if err := c.PutFileRef(ctx, FileRef{Name: name, LocalPath: src, SHA256: sum, Size: int64(len(data))}); err == nil {
		t.Fatal("interrupted upload succeeded")
	}
	if _, err := os.Stat(env.objectPath("files/" + name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index object exists after an interrupted upload: %v", err)
	}
	cancelAfter.Store(0)
	before := c.Stats()
	if err := c.PutFileRef(ctxT(t), FileRef{Name: name, LocalPath: src, SHA256: sum, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	if skipped := after.ObjectsSkipped - before.ObjectsSkipped; skipped < 2 {
		t.Fatalf("resumed upload skipped %d chunks, want ≥ 2 (stats %+v → %+v)", skipped, before, after)
	}
	if put := after.ObjectsUploaded - before.ObjectsUploaded; put != 6-(after.ObjectsSkipped-before.ObjectsSkipped)+1 {
		t.Fatalf("resumed upload put %d objects (stats %+v → %+v)", put, before, after)
	}

	var progress []Progress
	c.opts.Progress = func(p Progress) { progress = append(progress, p) }
	dst := filepath.Join(dir, "restored")
	if err := c.GetFile(ctxT(t), name, dst, sum); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, data) {
		t.Fatal("chunked round trip differs")
	}
	if len(progress) < 6 || progress[len(progress)-1].Done != int64(len(data)) {
		t.Fatalf("progress reports %+v", progress)
	}

	// A tampered chunk is refused and named.
	part := env.objectPath("files/" + name + ".part-3")
	raw, _ := os.ReadFile(part)
	raw[100] ^= 1
	os.WriteFile(part, raw, 0o644)
	err := c.GetFile(ctxT(t), name, filepath.Join(dir, "again"), sum)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name+".part-3") {
		t.Fatalf("tampered chunk: %v; want ErrCorrupt naming .part-3", err)
	}

	// Delete removes the chunks too.
	if err := c.Delete(ctxT(t), []string{name}); err != nil {
		t.Fatal(err)
	}
	left, err := c.list(ctxT(t), filesDir)
	if err != nil || len(left) != 0 {
		t.Fatalf("after Delete: %v, %v", left, err)
	}
}

func TestClient_PutFile_LocalMismatchRefused(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, nil)
	src, sum := writeFile(t, t.TempDir(), "src", []byte("good state"))
	os.WriteFile(src, []byte("evil state"), 0o644)
	err := c.PutFileRef(ctxT(t), FileRef{Name: sum + ".snap", LocalPath: src, SHA256: sum, Size: 10})
	if !errors.Is(err, ErrLocalMismatch) {
		t.Fatalf("got %v, want ErrLocalMismatch", err)
	}
	if n := c.Stats().ObjectsUploaded; n != 0 {
		t.Fatalf("%d objects uploaded", n)
	}
}
