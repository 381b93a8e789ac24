package upload

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClient_PutGetFile_RoundTrip(t *testing.T) {
	env := newEnv(t)
	key := bytes.Repeat([]byte{7}, 32)
	cases := []struct {
		name string
		key  []byte
		size int
	}{
		{"plain empty", nil, 0},
		{"plain small", nil, 1000},
		{"plain 3MiB", nil, 3 << 20},
		{"encrypted empty", key, 0},
		{"encrypted small", key, 1000},
		{"encrypted 3MiB", key, 3 << 20},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := env.client(t, func(o *Options) { o.EncryptionKey = tc.key })
			dir := t.TempDir()
			data := stateEntries(tc.size, uint64(i+1))
			src, sum := writeFile(t, dir, "src", data)
			name := sum + ".snap"
			if err := c.PutFile(ctxT(t), name, src); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, "dst")
			if err := c.GetFile(ctxT(t), name, dst, sum); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("downloaded %d bytes differ from the %d uploaded", len(got), len(data))
			}
			raw, err := os.ReadFile(env.objectPath("files/" + name))
			if err != nil {
				t.Fatal(err)
			}
			if tc.key != nil && tc.size > 0 && bytes.Contains(raw, data[:min(len(data), 64)]) {
				t.Fatal("encrypted object contains plaintext")
			}
			t.Logf("%d bytes → %d bytes stored", len(data), len(raw))
		})
	}
}

func TestClient_PutFile_ContentAddressedOnce(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, nil)
	src, sum := writeFile(t, t.TempDir(), "src", stateEntries(1<<20, 1))
	name := sum + ".snap"
	if err := c.PutFile(ctxT(t), name, src); err != nil {
		t.Fatal(err)
	}
	before, putsBefore := c.Stats(), env.requests.puts.Load()
	for range 3 {
		if err := c.PutFileRef(ctxT(t), FileRef{Name: name, LocalPath: src, SHA256: sum, Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	after := c.Stats()
	if puts := env.requests.puts.Load() - putsBefore; puts != 0 {
		t.Fatalf("%d PUT requests for a file already uploaded, want 0", puts)
	}
	if after.BytesUploaded != before.BytesUploaded || after.ObjectsSkipped-before.ObjectsSkipped != 3 {
		t.Fatalf("stats before %+v after %+v: want no bytes and 3 skips", before, after)
	}
	// A client with another key must not reuse the object: it could not
	// read it back.
	enc := env.client(t, func(o *Options) { o.EncryptionKey = bytes.Repeat([]byte{1}, 32) })
	if err := enc.PutFile(ctxT(t), name, src); err != nil {
		t.Fatal(err)
	}
	if enc.Stats().ObjectsUploaded != 1 {
		t.Fatalf("encrypting client stats %+v: want the object re-uploaded", enc.Stats())
	}
}

func TestClient_GetFile_TamperedObjectNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
	}{{"plain", nil}, {"encrypted", bytes.Repeat([]byte{3}, 32)}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			c := env.client(t, func(o *Options) { o.EncryptionKey = tc.key })
			dir := t.TempDir()
			src, sum := writeFile(t, dir, "src", stateEntries(200<<10, 9))
			name := sum + ".snap"
			if err := c.PutFile(ctxT(t), name, src); err != nil {
				t.Fatal(err)
			}
			obj := env.objectPath("files/" + name)
			raw, err := os.ReadFile(obj)
			if err != nil {
				t.Fatal(err)
			}
			raw[len(raw)/2] ^= 0x40
			if err := os.WriteFile(obj, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, "dst")
			err = c.GetFile(ctxT(t), name, dst, sum)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "dev-1/files/"+name) {
				t.Fatalf("GetFile of a tampered object: %v; want ErrCorrupt naming dev-1/files/%s", err, name)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("destination exists after a refused download: %v", err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("temp files left behind: %v", entries)
			}
			t.Log(err)
		})
	}
}

func TestClient_Errors(t *testing.T) {
	env := newEnv(t)
	src, sum := writeFile(t, t.TempDir(), "src", []byte("state"))
	good := env.client(t, nil)
	if err := good.PutFile(ctxT(t), sum+".snap", src); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*Options)
		op   func(*Client) error
		want error
		says string
	}{
		{"wrong secret", func(o *Options) { o.SecretKey = "wrong" + o.SecretKey },
			func(c *Client) error { return c.PutFile(ctxT(t), sum+".snap", src) }, ErrCredentials, "SignatureDoesNotMatch"},
		{"unknown access key", func(o *Options) { o.AccessKey = "nobody" },
			func(c *Client) error { return c.PutFile(ctxT(t), sum+".snap", src) }, ErrCredentials, "access key"},
		{"missing bucket", func(o *Options) { o.Bucket = "nope" },
			func(c *Client) error { return c.PutFile(ctxT(t), sum+".snap", src) }, ErrNoBucket, "s3://nope"},
		{"missing object", nil,
			func(c *Client) error { return c.GetFile(ctxT(t), "missing.snap", filepath.Join(t.TempDir(), "x"), "") }, ErrNotFound, "dev-1/files/missing.snap"},
		{"missing manifest", nil,
			func(c *Client) error { _, err := c.GetManifest(ctxT(t), "9.json"); return err }, ErrNotFound, "dev-1/manifests/9.json"},
		{"unencrypted object, key configured", func(o *Options) { o.EncryptionKey = bytes.Repeat([]byte{1}, 32) },
			func(c *Client) error { return c.GetFile(ctxT(t), sum+".snap", filepath.Join(t.TempDir(), "x"), sum) }, ErrCorrupt, "not encrypted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op(env.client(t, tc.edit))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v; want %v saying %q", err, tc.want, tc.says)
			}
			t.Log(err)
		})
	}
}

func TestClient_WrongEncryptionKey(t *testing.T) {
	env := newEnv(t)
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	src, sum := writeFile(t, t.TempDir(), "src", []byte("secret state"))
	if err := env.client(t, func(o *Options) { o.EncryptionKey = k1 }).PutFile(ctxT(t), sum+".snap", src); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  []byte
	}{{"other key", k2}, {"no key", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			c := env.client(t, func(o *Options) { o.EncryptionKey = tc.key })
			err := c.GetFile(ctxT(t), sum+".snap", filepath.Join(t.TempDir(), "x"), sum)
			if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), sum+".snap") {
				t.Fatalf("got %v; want ErrWrongKey naming the object", err)
			}
			t.Log(err)
		})
	}
}

func TestClient_CreateBucket(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, func(o *Options) { o.Bucket, o.CreateBucket = "fresh", true })
	if err := c.PutManifest(ctxT(t), "1.json", []byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetManifest(ctxT(t), "1.json")
	if err != nil || string(got) != `{"id":1}` {
		t.Fatalf("GetManifest = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(env.srv.Dir, "fresh")); err != nil {
		t.Fatalf("bucket directory: %v", err)
	}
}

func TestClient_ManifestsListDelete(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, func(o *Options) { o.EncryptionKey = bytes.Repeat([]byte{5}, 32) })
	for _, n := range []string{"2.json", "10.json", "1.json"} {
		if err := c.PutManifest(ctxT(t), n, []byte("manifest "+n)); err != nil {
			t.Fatal(err)
		}
	}
	names, err := c.ListManifests(ctxT(t))
	if err != nil || strings.Join(names, ",") != "1.json,10.json,2.json" {
		t.Fatalf("ListManifests = %v, %v", names, err)
	}
	if err := c.DeleteManifests(ctxT(t), []string{"10.json", "404.json"}); err != nil {
		t.Fatal(err)
	}
	names, _ = c.ListManifests(ctxT(t))
	if strings.Join(names, ",") != "1.json,2.json" {
		t.Fatalf("after delete: %v", names)
	}
	// A manifest moved to another name fails authentication: the name is
	// bound into the encryption.
	if err := os.Rename(env.objectPath("manifests/2.json"), env.objectPath("manifests/1.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetManifest(ctxT(t), "1.json"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("swapped manifest: %v, want ErrCorrupt", err)
	}
}

func TestClient_InvalidNames(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, nil)
	for _, n := range []string{"", "/abs", "a/../b", "../x", "x.snap.part-3", "a//b"} {
		if err := c.PutManifest(ctxT(t), n, nil); err == nil {
			t.Errorf("name %q accepted", n)
		}
	}
}
