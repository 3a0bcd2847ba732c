package store

import (
	"context"
	"errors"
	"path"
)

// Listings that must not grow with the fleet: a streaming walk (the sweep's scan of the
// demand index) and key-ordered pages with a cursor (the registry, for reconcile and the
// HTTP API). Bucket.List, which returns one slice, stays for prefixes bounded by one
// store's state.

// MaxListPage caps one ListPage (and one registry page); larger limits are clamped.
const MaxListPage = 1000

// Walk calls fn for every object under prefix as the backend streams it, page by page,
// without holding the listing: memory is one backend page, whatever the prefix holds.
// Order: the keys of one "directory" (a prefix ending in "/") are always contiguous; within
// a directory, object stores list in key order and file:// in the order of its directory
// walk (names sorted per directory). An error from fn stops the walk and is returned.
func (b *Bucket) Walk(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return b.do(ctx, OpList, prefix, checkPrefix, func(be backend) error {
		return be.list(ctx, prefix, fn)
	})
}

// ListPage returns up to limit objects under prefix whose key sorts after `after` ("" =
// from the start), in key order (bytewise = UTF-8 binary, the object stores' order), and
// whether more may follow. Callers page by passing the last key of the previous page. limit
// is clamped to [1, MaxListPage].
//
// Cost per page: every backend starts its listing at `after` (backend.listFrom), so a page
// costs one or two list requests on s3://, gs:// and azblob://, whatever the prefix holds;
// file:// reads the directories on the way (names only, memory bounded by a window);
// mem:// is in memory. docs/STORAGE.md §6 has the figures.
func (b *Bucket) ListPage(ctx context.Context, prefix, after string, limit int) ([]ObjectInfo, bool, error) {
	return b.listPageKept(ctx, prefix, after, limit, nil)
}

// listPageKept is ListPage over the objects keep accepts (nil: all): the others neither
// count toward limit nor end the page, so a page is short only at the end of the listing,
// however many objects keep refuses (they cost their share of the backend's listing).
func (b *Bucket) listPageKept(ctx context.Context, prefix, after string, limit int, keep func(ObjectInfo) bool) ([]ObjectInfo, bool, error) {
	limit = min(max(limit, 1), MaxListPage)
	out := make([]ObjectInfo, 0, min(limit, 64))
	more := false
	err := b.do(ctx, OpList, prefix, checkPrefix, func(be backend) error {
		err := be.listFrom(ctx, prefix, after, func(o ObjectInfo) error {
			if keep != nil && !keep(o) {
				return nil
			}
			if len(out) == limit {
				more = true
				return errPageFull
			}
			out = append(out, o)
			return nil
		})
		if errors.Is(err, errPageFull) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, more, nil
}

// errPageFull stops a listFrom once a page has one key more than it returns.
var errPageFull = errors.New("page full")

// RegistryPage is one page of registered stores of a kind, in name order.
type RegistryPage struct {
	Stores []StoreInfo
	// Next is the cursor for the following page ("" = this was the last page).
	Next string
}

// ListStores returns up to limit registered stores of kind after the store named after
// ("" = from the first), in registry key order. Memory and requests per page are bounded by
// limit (see Bucket.ListPage), so callers walk a fleet of any size page by page. Keys under
// the registry that are not entries (foreign.go) are skipped without ending the page, and
// Next is always the name of a store, so a cursor never lands on one.
func (db *DB) ListStores(ctx context.Context, kind Kind, after string, limit int) (RegistryPage, error) {
	if _, err := ParseKind(string(kind)); err != nil {
		return RegistryPage{}, err
	}
	if after != "" {
		if err := ValidateName(after); err != nil {
			return RegistryPage{}, err
		}
	}
	prefix := path.Join(registryDir, string(kind)) + "/"
	afterKey := ""
	if after != "" {
		afterKey = registryKey(Target{Kind: kind, Name: after})
	}
	objs, more, err := db.bucket.listPageKept(ctx, prefix, afterKey, limit, func(o ObjectInfo) bool {
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

// WalkDemand streams the demand index of kind (docs/FORMAT.md "Demand records"): fn gets
// every parsed record; keys under _demand/ that are not records are skipped as foreign. A
// store's records are contiguous (they share the directory _demand/<kind>/<name>/).
func (db *DB) WalkDemand(ctx context.Context, kind Kind, fn func(DemandRecord) error) error {
	if _, err := ParseKind(string(kind)); err != nil {
		return err
	}
	return db.bucket.Walk(ctx, demandKindPrefix(kind), func(o ObjectInfo) error {
		r, ok := ParseDemandKey(o.Key)
		if !ok || r.Target.Kind != kind {
			db.foreignObject(foreignDemand, o.Key)
			return nil
		}
		return fn(r)
	})
}
