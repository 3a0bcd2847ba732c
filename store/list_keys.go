package store

import "context"

// Listings of one shard's objects that recognise walkeeper's own keys (format_keys.go) and
// skip the rest as foreign (foreign.go), so a stray file is never replayed or deleted.

// listWAL returns the positions of shard's WAL objects in t, ascending.
func (db *DB) listWAL(ctx context.Context, t Target, shard string) ([]uint64, error) {
	prefix := walPrefix(t, shard)
	objs, err := db.bucket.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, len(objs))
	for _, o := range objs { // sorted by key, and equal-width position names sort by number
		if pos, ok := parseWALKey(prefix, o.Key); ok {
			out = append(out, pos)
		} else {
			db.foreignObject(foreignWAL, o.Key)
		}
	}
	return out, nil
}

// genFile is one generation file found by listGenerations.
type genFile struct {
	key string
	gen uint64
}

// listGenerations returns shard's generation files in t, in key order.
func (db *DB) listGenerations(ctx context.Context, t Target, shard string) ([]genFile, error) {
	prefix := genPrefix(t, shard)
	objs, err := db.bucket.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]genFile, 0, len(objs))
	for _, o := range objs {
		if g, ok := parseGenKey(prefix, o.Key); ok {
			out = append(out, genFile{key: o.Key, gen: g})
		} else {
			db.foreignObject(foreignGenerations, o.Key)
		}
	}
	return out, nil
}
