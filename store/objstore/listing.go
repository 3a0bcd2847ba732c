package objstore

import (
	"context"
	"errors"
)

// Listings that must not grow with the fleet: a streaming walk and key-ordered pages with a
// cursor; Bucket.List stays for prefixes bounded by one store's state.

// MaxListPage caps one ListPageBytes page (and one registry page); larger limits are clamped.
const MaxListPage = 1000

// Walk calls fn for every object under prefix as the backend streams it, holding one backend
// page, in key order, so a "directory"'s keys are contiguous; an error from fn stops it.
func (b *Bucket) Walk(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return b.do(ctx, OpList, prefix, checkPrefix, func(ctx context.Context, be backend, wd *watchdog) error {
		return be.list(ctx, prefix, callerFn(wd, fn))
	})
}

// ListPageBytes returns up to limit (clamped to [1, MaxListPage]) objects under prefix that
// keep accepts (nil: all), after `after` ("" = from the start) in bytewise key order, and
// whether more may follow. Refused objects neither count nor end the page, so a page is short
// only at the end. Every backend starts listing at `after`, so a page costs one or two list
// requests on object stores (docs/STORAGE.md §6). The page also ends with the object that
// brings the sum of size to maxBytes (0 or nil size: no such bound), always holding one
// object, and ListPageBytes returns that sum.
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
