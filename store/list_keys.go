package store

import "context"

// Listings of one shard's objects that recognise walkeeper's own keys (format_keys.go) and
// skip the rest as foreign (foreign.go), so a stray file is never replayed or deleted.

// listOwn returns, in key order, what parse makes of each key under prefix that walkeeper
// wrote (equal-width numbered names sort by number); every other key is foreign to place.
func listOwn[T any](ctx context.Context, db *DB, prefix, place string, parse func(prefix, key string) (T, bool)) ([]T, error) {
	objs, err := db.bucket.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if v, ok := parse(prefix, o.Key); ok {
			out = append(out, v)
		} else {
			db.foreignObject(place, o.Key)
		}
	}
	return out, nil
}

// listWAL returns the positions of shard's WAL objects in t, ascending.
func (db *DB) listWAL(ctx context.Context, t Target, shard string) ([]uint64, error) {
	return listOwn(ctx, db, walPrefix(t, shard), foreignWAL, parseWALKey)
}

// genFile is one generation file found by listGenerations.
type genFile struct {
	key   string
	gen   uint64
	epoch uint64 // the writer epoch that sealed it
}

// listGenerations returns shard's generation files in t, in key order.
func (db *DB) listGenerations(ctx context.Context, t Target, shard string) ([]genFile, error) {
	return listOwn(ctx, db, genPrefix(t, shard), foreignGenerations, func(prefix, key string) (genFile, bool) {
		g, e, ok := parseGenKey(prefix, key)
		return genFile{key: key, gen: g, epoch: e}, ok
	})
}
