package objstore

import (
	"context"
	"errors"
)

// Listings that must not grow with the fleet: a streaming walk (the sweep's scan of the
// demand index) and key-ordered pages with a cursor (the registry, for reconcile and the
// HTTP API). Bucket.List, which returns one slice, stays for prefixes bounded by one
// store's state.

// MaxListPage caps one ListPageWhere page (and one registry page); larger limits are clamped.
const MaxListPage = 1000

// Walk calls fn for every object under prefix as the backend streams it, page by page,
// without holding the listing: memory is one backend page, whatever the prefix holds.
// Order: every backend lists in key order (file:// reads each directory once, whatever its
// size), so the keys of one "directory" (a prefix ending in "/") are always contiguous. An
// error from fn stops the walk and is returned.
func (b *Bucket) Walk(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return b.do(ctx, OpList, prefix, checkPrefix, func(ctx context.Context, be backend, wd *watchdog) error {
		return be.list(ctx, prefix, callerFn(wd, fn))
	})
}

// ListPageWhere returns up to limit objects under prefix that keep accepts (nil: all) and
// whose key sorts after `after` ("" = from the start), in key order (bytewise = UTF-8 binary,
// the object stores' order), and whether more may follow. Callers page by passing the last
// key of the previous page. limit is clamped to [1, MaxListPage]. Objects keep refuses
// neither count toward limit nor end the page, so a page is short only at the end of the
// listing, however many keep refuses (they cost their share of the backend's listing).
//
// Cost per page: every backend starts its listing at `after` (backend.listFrom), so a page
// costs one or two list requests on s3://, gs:// and azblob://, whatever the prefix holds;
// file:// reads the directories on the way (names only, memory bounded by a window);
// mem:// is in memory. docs/STORAGE.md §6 has the figures.
func (b *Bucket) ListPageWhere(ctx context.Context, prefix, after string, limit int, keep func(ObjectInfo) bool) ([]ObjectInfo, bool, error) {
	objs, more, _, err := b.ListPageBytes(ctx, prefix, after, limit, 0, keep, nil)
	return objs, more, err
}

// ListPageBytes is ListPageWhere whose page also ends with the kept object that brings the sum
// of size over the page to maxBytes (0 or a nil size = no such bound), so that a page holds at
// most maxBytes plus one object's size, and always one object. It also returns that sum (0 with
// a nil size), so a caller need not measure the page again.
func (b *Bucket) ListPageBytes(ctx context.Context, prefix, after string, limit int, maxBytes int64,
	keep func(ObjectInfo) bool, size func(ObjectInfo) int64) ([]ObjectInfo, bool, int64, error) {
	limit = min(max(limit, 1), MaxListPage)
	out := make([]ObjectInfo, 0, min(limit, 64))
	more := false
	var weight int64
	err := b.do(ctx, OpList, prefix, checkPrefix, func(ctx context.Context, be backend, wd *watchdog) error {
		err := be.listFrom(ctx, prefix, after, callerFn(wd, func(o ObjectInfo) error {
			if keep != nil && !keep(o) {
				return nil
			}
			if len(out) == limit || (size != nil && maxBytes > 0 && weight >= maxBytes) {
				more = true
				return errPageFull
			}
			out = append(out, o)
			if size != nil {
				weight += size(o)
			}
			return nil
		}))
		if errors.Is(err, errPageFull) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, false, 0, err
	}
	return out, more, weight, nil
}

// errPageFull stops a listFrom once a page has one key more than it returns.
var errPageFull = errors.New("page full")
