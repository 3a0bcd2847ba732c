package store

import (
	"cmp"
	"context"
	"errors"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Objects the store reads whole whose size walkeeper's own writes keep small. One found longer
// (put there by hand or by another program) is refused as ErrCorrupt once limit+1 bytes were
// read, instead of being read whole into memory by every Open or commit that meets it.
const (
	// maxStoreMetaBytes bounds a store.json: a schema of at most 256 fields of 128-byte names
	// is about 60 KiB indented.
	maxStoreMetaBytes = 1 << 20
	// maxClaimBytes bounds an attempt claim, about 200 bytes.
	maxClaimBytes = 64 << 10
)

// MaxManifestBytes bounds a version of a base or shard manifest, which every read loads: far
// beyond what a store reaches (a base of 100,000 runs is about 60 MB), so that a version
// padded by hand is refused as ErrCorrupt instead of read whole by every reader, and a
// publisher refuses to write one no reader would read.
const MaxManifestBytes = 256 << 20

func (db *DB) manifestLimit() int64 { return cmp.Or(db.opts.maxManifestBytes, MaxManifestBytes) }

// getSmall reads the object at key, what it is, refusing one longer than limit.
func (db *DB) getSmall(ctx context.Context, key string, limit int64, what string) ([]byte, error) {
	raw, err := db.bucket.GetAtMost(ctx, key, limit, nil)
	if errors.Is(err, objstore.ErrTooLarge) {
		return nil, corruptf("%s (%s) is longer than the %d bytes walkeeper writes at most", what, key, limit)
	}
	return raw, err
}

// registered reports whether t has a registry entry, without reading it: its bytes are not
// needed, and whatever a hand put there is not read into memory.
func (db *DB) registered(ctx context.Context, t Target) error {
	ok, err := db.bucket.Exists(ctx, registryKey(t))
	if err == nil && !ok {
		err = ErrNotFound
	}
	return err
}
