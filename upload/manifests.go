package upload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
)

// maxManifestBytes bounds what GetManifest reads: a manifest lists files, it
// is never large, and a bound keeps a hostile object from exhausting memory.
const maxManifestBytes = 64 << 20

// ManifestObject is checkpoint id's manifest object name below
// <prefix>manifests/: zero-padded, so that names sort as ids do.
func ManifestObject(id uint64) string { return fmt.Sprintf("%020d.json", id) }

// PutManifest uploads data as <prefix>manifests/<name>, replacing any object
// of that name. Call it only after every file the manifest references is
// uploaded: a checkpoint exists remotely exactly when its manifest does
// (the Shipper keeps this order).
func (c *Client) PutManifest(ctx context.Context, name string, data []byte) error {
	if err := validateName("manifest", name); err != nil {
		return err
	}
	if err := c.Check(ctx); err != nil {
		return err
	}
	key := c.key(manifestsDir, name)
	buf, n, sum, err := c.encodeObject(bytes.NewReader(data), key)
	if err != nil {
		return fmt.Errorf("upload: put manifest %s: %w", name, err)
	}
	defer c.putBuf(buf)
	return c.putObject(ctx, key, buf.Bytes(), c.metadata(layoutSingle, n, hex.EncodeToString(sum[:])))
}

// ListManifests returns the names (below <prefix>manifests/) of the manifests
// in the bucket, sorted.
func (c *Client) ListManifests(ctx context.Context) ([]string, error) {
	if err := c.Check(ctx); err != nil {
		return nil, err
	}
	return c.list(ctx, manifestsDir)
}

// list returns the names of the objects below <prefix><dir>, sorted.
func (c *Client) list(ctx context.Context, dir string) ([]string, error) {
	prefix := c.key(dir, "")
	var names []string
	err := c.s3.list(ctx, prefix, func(key string) {
		if name := strings.TrimPrefix(key, prefix); name != "" && !strings.HasSuffix(name, "/") {
			names = append(names, name)
		}
	})
	if err != nil {
		return nil, c.classify("list", prefix, err)
	}
	sort.Strings(names)
	return names, nil
}

// GetManifest downloads and verifies <prefix>manifests/<name>. Errors:
// ErrNotFound, ErrCorrupt or ErrWrongKey, naming the object.
func (c *Client) GetManifest(ctx context.Context, name string) ([]byte, error) {
	if err := validateName("manifest", name); err != nil {
		return nil, err
	}
	if err := c.Check(ctx); err != nil {
		return nil, err
	}
	key := c.key(manifestsDir, name)
	r, info, err := c.openObject(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, c.corrupt(key, fmt.Errorf("manifest larger than %d bytes", maxManifestBytes))
	}
	sum := sha256.Sum256(data)
	if want := metaGet(info.UserMetadata, metaSHA256); want != "" && want != hex.EncodeToString(sum[:]) {
		return nil, c.corrupt(key, fmt.Errorf("plaintext SHA-256 %x, metadata says %s", sum, want))
	}
	return data, nil
}
