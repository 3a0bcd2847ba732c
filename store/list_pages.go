package store

import (
	"container/heap"
	"context"
	"errors"
	"io"
	"path"
	"sort"
	"strings"

	"gocloud.dev/blob"
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
// from the start), in key order, and whether more may follow. Callers page by passing the
// last key of the previous page. limit is clamped to [1, MaxListPage].
//
// Cost per page: mem:// and s3:// start the backend listing at `after` (one or a few list
// requests per page); file:// and the other backends stream the prefix and keep only the
// limit smallest keys after `after` (memory bounded by limit, time linear in the prefix).
func (b *Bucket) ListPage(ctx context.Context, prefix, after string, limit int) ([]ObjectInfo, bool, error) {
	limit = min(max(limit, 1), MaxListPage)
	var out []ObjectInfo
	var more bool
	err := b.do(ctx, OpList, prefix, checkPrefix, func(be backend) error {
		var err error
		if g, ok := be.(*gocloudBackend); ok && g.startsAfter() {
			out, more, err = g.listPageAfter(ctx, prefix, after, limit)
			return err
		}
		out, more, err = listPageScan(ctx, be, prefix, after, limit)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, more, nil
}

// listPageScan is ListPage for any backend: stream the prefix, keep the limit smallest keys
// after `after` in a bounded max-heap.
func listPageScan(ctx context.Context, be backend, prefix, after string, limit int) ([]ObjectInfo, bool, error) {
	h := &keyMaxHeap{}
	more := false
	err := be.list(ctx, prefix, func(o ObjectInfo) error {
		if o.Key <= after {
			return nil
		}
		if h.Len() < limit {
			heap.Push(h, o)
			return nil
		}
		more = true
		if o.Key < (*h)[0].Key {
			(*h)[0] = o
			heap.Fix(h, 0)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	out := []ObjectInfo(*h)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, more, nil
}

// keyMaxHeap keeps the largest key on top, so the bounded page evicts it first.
type keyMaxHeap []ObjectInfo

func (h keyMaxHeap) Len() int           { return len(h) }
func (h keyMaxHeap) Less(i, j int) bool { return h[i].Key > h[j].Key }
func (h keyMaxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyMaxHeap) Push(x any)        { *h = append(*h, x.(ObjectInfo)) }
func (h *keyMaxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// startsAfter reports whether the backend can begin a listing after a key: memblob's page
// token is the last key of the previous page (mem:// is the only shared gocloud backend).
// S3's StartAfter and GCS's StartOffset would do the same; until they are wired, those
// backends take the bounded scan.
func (g *gocloudBackend) startsAfter() bool { return g.shared }

// listPageAfter is ListPage on a backend whose page token is a key to start after.
func (g *gocloudBackend) listPageAfter(ctx context.Context, prefix, after string, limit int) ([]ObjectInfo, bool, error) {
	opts := &blob.ListOptions{Prefix: prefix}
	token := blob.FirstPageToken
	if after != "" {
		token = []byte(after)
	}
	out := make([]ObjectInfo, 0, limit)
	for {
		objs, next, err := g.bkt.ListPage(ctx, token, limit-len(out)+1, opts)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, false, mapErr(err)
		}
		for _, o := range objs {
			if o.IsDir || isTempKey(o.Key) || o.Key <= after {
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
		}
		if len(next) == 0 {
			return out, false, nil
		}
		token = next
	}
}

// RegistryPage is one page of registered stores of a kind, in name order.
type RegistryPage struct {
	Stores []StoreInfo
	// Next is the cursor for the following page ("" = this was the last page).
	Next string
}

// ListStores returns up to limit registered stores of kind after the store named after
// ("" = from the first), in registry key order. Memory and requests per page are bounded by
// limit (see Bucket.ListPage), so callers walk a fleet of any size page by page.
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
	objs, more, err := db.bucket.ListPage(ctx, prefix, afterKey, limit)
	if err != nil {
		return RegistryPage{}, err
	}
	page := RegistryPage{Stores: make([]StoreInfo, 0, len(objs))}
	for _, o := range objs {
		name := strings.TrimSuffix(path.Base(o.Key), ".json")
		if ValidateName(name) != nil {
			continue
		}
		page.Stores = append(page.Stores, StoreInfo{Target: Target{Kind: kind, Name: name}, Kind: kind, Name: name, CreatedAt: o.ModTime})
	}
	if more && len(objs) > 0 {
		page.Next = strings.TrimSuffix(path.Base(objs[len(objs)-1].Key), ".json")
	}
	return page, nil
}

// WalkDemand streams the demand index of kind (docs/FORMAT.md "Demand records"): fn gets
// every parsed record; keys under _demand/ that are not records are skipped. A store's
// records are contiguous (they share the directory _demand/<kind>/<name>/).
func (db *DB) WalkDemand(ctx context.Context, kind Kind, fn func(DemandRecord) error) error {
	if _, err := ParseKind(string(kind)); err != nil {
		return err
	}
	return db.bucket.Walk(ctx, demandKindPrefix(kind), func(o ObjectInfo) error {
		r, ok := ParseDemandKey(o.Key)
		if !ok {
			return nil
		}
		return fn(r)
	})
}
