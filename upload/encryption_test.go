package upload

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyObject copies an object's bytes and metadata as they are in the bucket
// to another key, as someone with write access to the bucket could.
func copyObject(t *testing.T, c *Client, from, to string) {
	t.Helper()
	body, info, err := c.s3.getObject(ctxT(t), from)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.s3.putObject(ctxT(t), to, bytes.NewReader(data), int64(len(data)), info.UserMetadata); err != nil {
		t.Fatal(err)
	}
}

// TestEncryption_ObjectMovedToAnotherPrefixRefused: with a key shared by a
// fleet, a manifest or file of device 1 copied into device 2's prefix (or
// under another name) does not open for device 2: the object's full key is
// authenticated.
func TestEncryption_ObjectMovedToAnotherPrefixRefused(t *testing.T) {
	env := newEnv(t)
	key := bytes.Repeat([]byte{7}, 32)
	dev1 := env.client(t, func(o *Options) { o.EncryptionKey = key })
	dev2 := env.client(t, func(o *Options) { o.EncryptionKey, o.Prefix = key, "dev-2/" })
	src, sum := writeFile(t, t.TempDir(), "src", []byte("device 1 state"))
	if err := dev1.PutFile(ctxT(t), sum+".snap", src); err != nil {
		t.Fatal(err)
	}
	if err := dev1.PutManifest(ctxT(t), "5.json", []byte(`{"id":5,"device":"dev-1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := dev2.PutManifest(ctxT(t), "4.json", []byte(`{"id":4,"device":"dev-2"}`)); err != nil {
		t.Fatal(err)
	}
	copyObject(t, dev1, "dev-1/manifests/5.json", "dev-2/manifests/5.json")
	copyObject(t, dev1, "dev-1/files/"+sum+".snap", "dev-2/files/"+sum+".snap")
	copyObject(t, dev2, "dev-2/manifests/4.json", "dev-2/manifests/6.json") // replayed under a newer name

	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"manifest moved to another device", func() error { _, err := dev2.GetManifest(ctxT(t), "5.json"); return err }},
		{"file moved to another device", func() error {
			return dev2.GetFile(ctxT(t), sum+".snap", filepath.Join(t.TempDir(), "x"), sum)
		}},
		{"manifest renamed", func() error { _, err := dev2.GetManifest(ctxT(t), "6.json"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
	// The originals still open where they were written.
	if got, err := dev1.GetManifest(ctxT(t), "5.json"); err != nil || !strings.Contains(string(got), "dev-1") {
		t.Fatalf("original manifest: %q, %v", got, err)
	}
}

// TestClient_GetFileRef_CappedAtManifestSize: a download is cut off as soon
// as it runs past the size the manifest records, and a short one is refused.
func TestClient_GetFileRef_CappedAtManifestSize(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, nil)
	data := stateEntries(300<<10, 9)
	src, sum := writeFile(t, t.TempDir(), "src", data)
	if err := c.PutFile(ctxT(t), sum+".snap", src); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		size int64
		says string
	}{
		{"manifest says smaller", 1000, "larger than the 1000 bytes"},
		{"manifest says larger", int64(len(data)) + 1, "its manifest records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "x")
			err := c.GetFileRef(ctxT(t), FileRef{Name: sum + ".snap", LocalPath: dst, SHA256: sum, Size: tc.size})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want ErrCorrupt saying %q", err, tc.says)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a refused download left the file")
			}
		})
	}
	dst := filepath.Join(t.TempDir(), "ok")
	if err := c.GetFileRef(ctxT(t), FileRef{Name: sum + ".snap", LocalPath: dst, SHA256: sum, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
}
