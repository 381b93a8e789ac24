package upload

import (
	"context"
	"errors"
	"fmt"
)

// RetainResult lists what Retain deleted.
type RetainResult struct {
	// Manifests are the deleted manifest names.
	Manifests []string
	// Files are the deleted file names (with their chunks), below files/.
	Files []string
}

// errKeepEmpty is returned when retention is asked to keep nothing.
var errKeepEmpty = errors.New("upload: retention asked to keep no manifest; refusing to delete every checkpoint")

// Retain mirrors local retention remotely. It deletes every manifest not in
// keep (savepoints are kept by passing them), then every file that no kept
// manifest references; referenced returns the file names (below files/) a
// manifest lists. Order and safety:
//   - every kept manifest present remotely is read before anything is
//     deleted; if one cannot be read (missing is fine, corrupt or
//     unreachable is not), nothing is deleted and the error is returned;
//   - manifests go before files, so a manifest never references a deleted
//     file, even if Retain stops half-way;
//   - an empty keep is refused (errKeepEmpty): it would delete everything.
//
// Retain must not run while files for a not-yet-uploaded manifest are being
// uploaded by someone else: they are referenced by no manifest yet. The
// Shipper serializes the two and protects its queued checkpoints' files.
func (c *Client) Retain(ctx context.Context, keep []string, referenced func(manifest []byte) []string) (RetainResult, error) {
	refs := func(ctx context.Context, name string) ([]string, error) {
		data, err := c.GetManifest(ctx, name)
		if err != nil {
			return nil, err
		}
		return referenced(data), nil
	}
	return c.retain(ctx, keep, refs, nil)
}

// retain is Retain with the references of a kept manifest given by refs and
// the files in protect never deleted.
func (c *Client) retain(ctx context.Context, keep []string, refs func(context.Context, string) ([]string, error), protect map[string]bool) (RetainResult, error) {
	var res RetainResult
	if len(keep) == 0 {
		return res, errKeepEmpty
	}
	manifests, err := c.ListManifests(ctx)
	if err != nil {
		return res, err
	}
	keepSet := make(map[string]bool, len(keep))
	for _, k := range keep {
		keepSet[k] = true
	}
	referenced := make(map[string]bool, len(protect))
	for f := range protect {
		referenced[f] = true
	}
	for _, m := range manifests {
		if !keepSet[m] {
			res.Manifests = append(res.Manifests, m)
			continue
		}
		files, err := refs(ctx, m)
		if err != nil {
			return RetainResult{}, fmt.Errorf("upload: retention: kept manifest %s: %w", m, err)
		}
		for _, f := range files {
			referenced[f] = true
		}
	}
	if err := c.DeleteManifests(ctx, res.Manifests); err != nil {
		return RetainResult{}, err
	}
	objects, err := c.list(ctx, filesDir)
	if err != nil {
		return res, err
	}
	var keys []string
	seen := map[string]bool{}
	for _, obj := range objects {
		f := fileOf(obj)
		if referenced[f] {
			continue
		}
		keys = append(keys, c.key(filesDir, obj))
		if !seen[f] {
			seen[f] = true
			res.Files = append(res.Files, f)
		}
	}
	if err := c.remove(ctx, keys); err != nil {
		return res, err
	}
	return res, nil
}
