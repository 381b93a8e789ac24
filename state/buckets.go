package state

import (
	"fmt"
	"math"
)

// bucketRegistry names the buckets of a Backend and remembers how to find the
// key group of their keys.
type bucketRegistry struct {
	names  []string
	byName map[string]Bucket
	kgOf   []KeyGroupFunc
}

func newBucketRegistry() bucketRegistry {
	return bucketRegistry{byName: make(map[string]Bucket)}
}

func (r *bucketRegistry) register(name string, kgOf KeyGroupFunc) (Bucket, error) {
	if name == "" {
		return 0, fmt.Errorf("state: empty bucket name")
	}
	if b, ok := r.byName[name]; ok {
		if kgOf != nil {
			r.kgOf[b] = kgOf
		}
		return b, nil
	}
	if uint64(len(r.names)) == math.MaxUint32 {
		return 0, fmt.Errorf("state: too many buckets")
	}
	b := Bucket(len(r.names))
	r.names = append(r.names, name)
	r.kgOf = append(r.kgOf, kgOf)
	r.byName[name] = b
	return b, nil
}

// keep reports whether Restore loads key of the named bucket under opts,
// registering an unknown bucket when no filter needs its layout.
func (r *bucketRegistry) keep(name []byte, key []byte, opts RestoreOptions) (Bucket, bool, error) {
	b, ok := r.byName[string(name)]
	if !ok {
		if opts.KeyGroups != nil {
			return 0, false, fmt.Errorf("%w: %q (register it before a key-group-filtered restore)", ErrUnknownBucket, name)
		}
		var err error
		if b, err = r.register(string(name), nil); err != nil {
			return 0, false, err
		}
	}
	if opts.KeyGroups == nil || r.kgOf[b] == nil {
		return b, true, nil
	}
	kg, ok := r.kgOf[b](key)
	return b, !ok || opts.KeyGroups.Contains(kg), nil
}
