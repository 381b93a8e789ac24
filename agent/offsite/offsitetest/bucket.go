// Package offsitetest is the S3 fixture that the tests of agent/offsite and
// of the agent's restore share: a real S3 server (versitygw) on loopback
// with bucket "eddy", a client below device d1's prefix, and checkpoints
// written and shipped the way the uploader ships them.
package offsitetest

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/scripts/s3server"
	"github.com/eddy-edge/eddy/upload"
)

// Device is the device whose prefix ("d1/") the fixture's client writes
// below.
const Device = "d1"

// Bucket is a running S3 server with bucket "eddy" and the device's
// client.
type Bucket struct {
	Server *s3server.Server
	Client *upload.Client // below Device's prefix
}

// Start starts the server and makes bucket "eddy"; dial makes the
// device's client for it (the caller knows how its code under test builds
// one). Both stop when the test ends.
func Start(t testing.TB, dial func(*s3server.Server) (*upload.Client, error)) *Bucket {
	t.Helper()
	s := s3server.Start(t)
	s.MakeBucket("eddy")
	client, err := dial(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &Bucket{Server: s, Client: client}
}

// Ship uploads checkpoint m of store as the uploader does: its files,
// then its manifest.
func (b *Bucket) Ship(t testing.TB, store *checkpoint.Store, m *checkpoint.Manifest) {
	t.Helper()
	ctx := context.Background()
	for _, ref := range m.Files {
		if err := b.Client.PutFileRef(ctx, upload.FileRef{Name: path.Base(ref.Name), LocalPath: filepath.Join(store.Dir(), ref.Name),
			SHA256: ref.SHA256, Size: ref.Size}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := checkpoint.MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Client.PutManifest(ctx, upload.ManifestObject(m.ID), data); err != nil {
		t.Fatal(err)
	}
}

// Object is the path of object key (below the device's prefix) in the
// server's backing directory, for a test to damage or remove.
func (b *Bucket) Object(key string) string {
	return filepath.Join(b.Server.Dir, "eddy", Device, filepath.FromSlash(key))
}

// Empty removes every object below the device's prefix (an upload skips a
// file whose object exists, damaged or not).
func (b *Bucket) Empty(t testing.TB) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(b.Server.Dir, "eddy", Device)); err != nil {
		t.Fatal(err)
	}
}

// WriteCheckpoint writes full checkpoint id, whose one snapshot holds key
// k = value, into store.
func WriteCheckpoint(t testing.TB, store *checkpoint.Store, id uint64, value string) *checkpoint.Manifest {
	t.Helper()
	ref, err := store.WriteSnapshot("t0", "p", checkpoint.KindFull, id, func(fn func(bucket, key, value []byte, deleted bool) error) error {
		return fn([]byte("b"), []byte("k"), []byte(value), false)
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Manifest{FormatVersion: checkpoint.ManifestVersion, ID: id, Time: time.Unix(int64(id), 0).UTC(),
		Kind: checkpoint.KindFull, Files: []checkpoint.FileRef{ref}}
	if err := store.WriteManifest(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// FlipByte damages the file at p in its middle.
func FlipByte(t testing.TB, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
