package upload

import (
	"context"
	"errors"
	"fmt"
)

// Delete removes the files <prefix>files/<name> for every name, with their
// chunk objects. Names that do not exist are ignored. It lists
// <prefix>files/ once to find the chunks.
func (c *Client) Delete(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		if err := validateName("file", n); err != nil {
			return err
		}
		want[n] = true
	}
	if err := c.Check(ctx); err != nil {
		return err
	}
	objects, err := c.list(ctx, filesDir)
	if err != nil {
		return err
	}
	var keys []string
	for _, obj := range objects {
		if want[fileOf(obj)] {
			keys = append(keys, c.key(filesDir, obj))
		}
	}
	return c.remove(ctx, keys)
}

// DeleteManifests removes <prefix>manifests/<name> for every name. Names that
// do not exist are ignored.
func (c *Client) DeleteManifests(ctx context.Context, names []string) error {
	keys := make([]string, 0, len(names))
	for _, n := range names {
		if err := validateName("manifest", n); err != nil {
			return err
		}
		keys = append(keys, c.key(manifestsDir, n))
	}
	if err := c.Check(ctx); err != nil {
		return err
	}
	return c.remove(ctx, keys)
}

// fileOf returns the file an object below files/ belongs to: itself, or for
// a chunk object the file it is a chunk of.
func fileOf(object string) string {
	if loc := partSuffix.FindStringIndex(object); loc != nil {
		return object[:loc[0]]
	}
	return object
}

// remove deletes keys with multi-object deletes. A key that is already
// gone is not an error.
func (c *Client) remove(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	failed, err := c.s3.deleteObjects(ctx, keys)
	if err != nil {
		return fmt.Errorf("upload: delete %d objects: %w", len(keys), c.classify("delete", "", err))
	}
	var errs []error
	for _, f := range failed {
		if err := c.classify("delete", f.Key, f.Err); !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("upload: delete %d objects: %w", len(keys), errors.Join(errs...))
	}
	return nil
}
