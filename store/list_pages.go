package store

import (
	"context"
	"encoding/json"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// MaxListPage caps one registry page; a limit outside 1..MaxListPage is clamped into it.
const MaxListPage = objstore.MaxListPage

// RegistryPage is one page of registered stores of a kind, in name order.
type RegistryPage struct {
	Stores []StoreInfo
	// Next is the cursor for the following page ("" = this was the last page).
	Next string
}

// ListStores returns up to limit registered stores of kind after the store named after
// ("" = from the first), in name order, skipping foreign keys.
func (db *DB) ListStores(ctx context.Context, kind Kind, after string, limit int) (RegistryPage, error) {
	page, _, err := db.listStores(ctx, kind, after, limit, 0)
	return page, err
}

// listStores is ListStores also bounded by maxBytes of JSON text (<= 0: none), returning the
// page's size.
func (db *DB) listStores(ctx context.Context, kind Kind, after string, limit int, maxBytes int64) (RegistryPage, int64, error) {
	if _, err := ParseKind(string(kind)); err != nil {
		return RegistryPage{}, 0, err
	}
	afterKey := ""
	if after != "" {
		if err := ValidateName(after); err != nil {
			return RegistryPage{}, 0, err
		}
		afterKey = registryKey(Target{Kind: kind, Name: after})
	}
	var measure func(objstore.ObjectInfo) int64 // nil without a bound: fleet-wide walks do not pay for it
	if maxBytes > 0 {
		measure = func(o objstore.ObjectInfo) int64 { return registryInfo(kind, o).JSONBytes() }
	}
	objs, more, size, err := db.bucket.ListPageBytes(ctx, registryPrefix(kind), afterKey, limit, maxBytes, func(o objstore.ObjectInfo) bool {
		if _, ok := parseRegistryKey(kind, o.Key); ok {
			return true
		}
		db.foreignObject(foreignRegistry, o.Key)
		return false
	}, measure)
	if err != nil {
		return RegistryPage{}, 0, err
	}
	page := RegistryPage{Stores: make([]StoreInfo, 0, len(objs))}
	for _, o := range objs {
		page.Stores = append(page.Stores, registryInfo(kind, o))
	}
	if more && len(page.Stores) > 0 {
		page.Next = page.Stores[len(page.Stores)-1].Name
	}
	return page, size, nil
}

// registryInfo is the entry of a registry key that parseRegistryKey accepts.
func registryInfo(kind Kind, o objstore.ObjectInfo) StoreInfo {
	name, _ := parseRegistryKey(kind, o.Key)
	return StoreInfo{Target: Target{Kind: kind, Name: name}, Kind: kind, Name: name, CreatedAt: o.ModTime}
}

// MaxStoreInfoJSONBytes bounds StoreInfo.JSONBytes: the longest kind, name and time, and more.
const MaxStoreInfoJSONBytes = 384

// listedStore is a registry entry as GET /api/v1/stores lists it: the entry and its target.
type listedStore struct {
	Target string `json:"target"`
	StoreInfo
}

// JSONBytes is the length of the entry's JSON text as GET /api/v1/stores lists it
// (MaxStoreInfoJSONBytes if it does not encode).
func (i StoreInfo) JSONBytes() int64 {
	// Names, kinds and times have no byte that HTML escaping would change.
	b, err := json.Marshal(listedStore{Target: i.Target.String(), StoreInfo: i})
	if err != nil {
		return MaxStoreInfoJSONBytes
	}
	return int64(len(b))
}

// TargetsPage is one page of registered stores across kinds.
type TargetsPage struct {
	Stores []StoreInfo
	// Next is the cursor for the following page (the zero Target = this was the last page).
	Next Target
}

// ListTargets is ListStores across kinds, in the order given, after the store after (zero =
// from the first); Next is set only when a store follows.
//
// REQUIRES: after is the zero Target or of one of kinds.
func (db *DB) ListTargets(ctx context.Context, kinds []Kind, after Target, limit int) (TargetsPage, error) {
	return db.ListTargetsWith(ctx, TargetsOptions{Kinds: kinds, After: after, Limit: limit})
}

// TargetsOptions selects and bounds one page of ListTargetsWith.
type TargetsOptions struct {
	Kinds []Kind
	After Target
	Limit int
	// MaxBytes bounds the page by its entries' JSON text (StoreInfo.JSONBytes) as
	// ListOptions.MaxBytes bounds rows.
	MaxBytes int64
}

// ListTargetsWith is ListTargets bounded in bytes as well (TargetsOptions.MaxBytes).
//
// REQUIRES: o.After is the zero Target or of one of o.Kinds.
func (db *DB) ListTargetsWith(ctx context.Context, o TargetsOptions) (TargetsPage, error) {
	limit := min(max(o.Limit, 1), MaxListPage)
	out := TargetsPage{Stores: make([]StoreInfo, 0, min(limit, 64))}
	var size int64
	started := o.After.Kind == ""
	for i, k := range o.Kinds {
		cursor := ""
		if !started {
			if k != o.After.Kind {
				continue
			}
			started, cursor = true, o.After.Name
		}
		for {
			// room > 0 while the page is not full; without a bound size stays 0, and so room <= 0.
			page, n, err := db.listStores(ctx, k, cursor, limit-len(out.Stores), o.MaxBytes-size)
			if err != nil {
				return TargetsPage{}, err
			}
			out.Stores = append(out.Stores, page.Stores...)
			size += n
			if len(out.Stores) == limit || pageFull(size, o.MaxBytes) {
				more := page.Next != ""
				if !more {
					if more, err = db.anyStore(ctx, o.Kinds[i+1:]); err != nil {
						return TargetsPage{}, err
					}
				}
				if more {
					out.Next = out.Stores[len(out.Stores)-1].Target
				}
				return out, nil
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
	}
	return out, nil
}

// anyStore reports whether a store of one of kinds is registered.
func (db *DB) anyStore(ctx context.Context, kinds []Kind) (bool, error) {
	for _, k := range kinds {
		page, err := db.ListStores(ctx, k, "", 1)
		if err != nil {
			return false, err
		}
		if len(page.Stores) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// eachStore calls fn for every registered store of kind, in name order, a page at a time.
func (db *DB) eachStore(ctx context.Context, kind Kind, fn func(StoreInfo)) error {
	for after := ""; ; {
		page, err := db.ListStores(ctx, kind, after, MaxListPage)
		if err != nil {
			return err
		}
		for _, info := range page.Stores {
			fn(info)
		}
		if page.Next == "" {
			return nil
		}
		after = page.Next
	}
}

// WalkDemand streams the demand index of kind (docs/FORMAT.md "Demand records"): fn gets
// every parsed record; keys under _demand/ that are not records are skipped as foreign. A
// store's records are contiguous (they share the directory _demand/<kind>/<name>/).
func (db *DB) WalkDemand(ctx context.Context, kind Kind, fn func(DemandRecord) error) error {
	if _, err := ParseKind(string(kind)); err != nil {
		return err
	}
	return db.bucket.Walk(ctx, demandKindPrefix(kind), func(o objstore.ObjectInfo) error {
		r, ok := ParseDemandKey(o.Key)
		if !ok || r.Target.Kind != kind {
			db.foreignObject(foreignDemand, o.Key)
			return nil
		}
		return fn(r)
	})
}
