package upload

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// BenchmarkClient_PutFile uploads a 32 MiB file of state entries (chunked)
// to the local versitygw; MB/s is plaintext throughput, and the
// stored/plain ratio is the bytes on the wire per byte of state.
func BenchmarkClient_PutFile(b *testing.B) {
	for _, enc := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "encrypted"}[enc], func(b *testing.B) {
			env := newEnv(b)
			c := env.client(b, func(o *Options) {
				if enc {
					o.EncryptionKey = bytes.Repeat([]byte{1}, 32)
				}
			})
			data := stateEntries(32<<20, 7)
			src, _ := writeFile(b, b.TempDir(), "src", data)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A new name each time: the same name is uploaded once.
				if err := c.PutFile(ctxT(b), "f"+itoa(i%100)+"-"+itoa(i/100)+".snap", src); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st := c.Stats()
			b.ReportMetric(float64(st.BytesUploaded)/float64(int64(b.N)*int64(len(data))), "stored/plain")
		})
	}
}

// BenchmarkClient_GetFile downloads, decrypts, decompresses and verifies a
// 32 MiB file of state entries from the local versitygw.
func BenchmarkClient_GetFile(b *testing.B) {
	for _, enc := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "encrypted"}[enc], func(b *testing.B) {
			env := newEnv(b)
			c := env.client(b, func(o *Options) {
				if enc {
					o.EncryptionKey = bytes.Repeat([]byte{1}, 32)
				}
			})
			dir := b.TempDir()
			data := stateEntries(32<<20, 7)
			src, sum := writeFile(b, dir, "src", data)
			if err := c.PutFile(ctxT(b), sum+".snap", src); err != nil {
				b.Fatal(err)
			}
			dst := filepath.Join(dir, "dst")
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.GetFile(ctxT(b), sum+".snap", dst, sum); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			os.Remove(dst)
		})
	}
}

// TestFigure_ChangedEntriesUploadBytes reports the bytes uploaded for an
// incremental snapshot holding 1% of 1M state entries (10k entries of ~80
// bytes), against the bound of 2× the changed bytes after
// compression.
func TestFigure_ChangedEntriesUploadBytes(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, nil)
	changed := stateEntries(10_000*80, 11)
	src, sum := writeFile(t, t.TempDir(), "incr", changed)
	if err := c.PutFile(ctxT(t), sum+".snap", src); err != nil {
		t.Fatal(err)
	}
	up := c.Stats().BytesUploaded
	enc, _ := zstd.NewWriter(nil)
	compressed := len(enc.EncodeAll(changed, nil))
	t.Logf("1%% of 1M entries: %d bytes changed, %d after zstd → %d bytes uploaded (%.2f× compressed)",
		len(changed), compressed, up, float64(up)/float64(compressed))
	if up > 2*int64(compressed) {
		t.Fatalf("uploaded %d bytes for %d changed bytes compressing to %d", up, len(changed), compressed)
	}
}
