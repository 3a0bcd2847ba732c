package store

import (
	"context"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// MaxListPage caps one registry page; larger limits are clamped.
const MaxListPage = objstore.MaxListPage

// RegistryPage is one page of registered stores of a kind, in name order.
type RegistryPage struct {
	Stores []StoreInfo
	// Next is the cursor for the following page ("" = this was the last page).
	Next string
}

// ListStores returns up to limit registered stores of kind after the store named after
// ("" = from the first), in registry key order. Memory and requests per page are bounded by
// limit (see Bucket.ListPageWhere), so callers walk a fleet of any size page by page. Keys under
// the registry that are not entries (foreign.go) are skipped without ending the page, and
// Next is always the name of a store, so a cursor never lands on one.
func (db *DB) ListStores(ctx context.Context, kind Kind, after string, limit int) (RegistryPage, error) {
	if _, err := ParseKind(string(kind)); err != nil {
		return RegistryPage{}, err
	}
	afterKey := ""
	if after != "" {
		if err := ValidateName(after); err != nil {
			return RegistryPage{}, err
		}
		afterKey = registryKey(Target{Kind: kind, Name: after})
	}
	objs, more, err := db.bucket.ListPageWhere(ctx, registryPrefix(kind), afterKey, limit, func(o objstore.ObjectInfo) bool {
		if _, ok := parseRegistryKey(kind, o.Key); ok {
			return true
		}
		db.foreignObject(foreignRegistry, o.Key)
		return false
	})
	if err != nil {
		return RegistryPage{}, err
	}
	page := RegistryPage{Stores: make([]StoreInfo, 0, len(objs))}
	for _, o := range objs {
		name, _ := parseRegistryKey(kind, o.Key)
		page.Stores = append(page.Stores, StoreInfo{Target: Target{Kind: kind, Name: name}, Kind: kind, Name: name, CreatedAt: o.ModTime})
	}
	if more && len(page.Stores) > 0 {
		page.Next = page.Stores[len(page.Stores)-1].Name
	}
	return page, nil
}

// TargetsPage is one page of registered stores across kinds.
type TargetsPage struct {
	Stores []StoreInfo
	// Next is the cursor for the following page (the zero Target = this was the last page).
	Next Target
}

// ListTargets returns up to limit registered stores of kinds, kind by kind in the order
// given and each kind in name order, starting after the store after (the zero Target = from
// the first). It is ListStores across kinds: a page holds at most limit stores and costs
// about limit/1000 + 1 registry listings per kind, whatever the fleet's size. Next is set
// only when a store follows, so the last page never comes back empty.
//
// REQUIRES: after is the zero Target or of one of kinds.
func (db *DB) ListTargets(ctx context.Context, kinds []Kind, after Target, limit int) (TargetsPage, error) {
	limit = min(max(limit, 1), MaxListPage)
	out := TargetsPage{Stores: make([]StoreInfo, 0, min(limit, 64))}
	started := after.Kind == ""
	for i, k := range kinds {
		cursor := ""
		if !started {
			if k != after.Kind {
				continue
			}
			started, cursor = true, after.Name
		}
		for {
			page, err := db.ListStores(ctx, k, cursor, limit-len(out.Stores))
			if err != nil {
				return TargetsPage{}, err
			}
			out.Stores = append(out.Stores, page.Stores...)
			if len(out.Stores) == limit {
				more := page.Next != ""
				if !more {
					if more, err = db.anyStore(ctx, kinds[i+1:]); err != nil {
						return TargetsPage{}, err
					}
				}
				if more {
					out.Next = out.Stores[limit-1].Target
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

// anyStore reports whether a store of one of kinds is registered: a page of one per kind, so
// that a full page at a kind's end has a next page only when a store follows.
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
