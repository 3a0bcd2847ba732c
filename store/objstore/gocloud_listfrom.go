package objstore

import (
	"context"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// listFrom starts the storage's own listing at startAfter, so a page costs about one list
// request whatever the prefix holds:
//
//   - s3://: ListObjectsV2 StartAfter (ListObjects Marker with use_legacy_list), set on the
//     first request only; later pages follow the continuation token.
//   - gs://: Query.StartOffset (inclusive; the key itself is skipped here).
//   - azblob://: List Blobs startFrom (inclusive; service version 2026-02-06, sent by the
//     SDK walkeeper builds with), set on the first request only; later pages follow the
//     marker. A server that ignores it lists from the start of the prefix: still correct
//     (keys up to startAfter are skipped here), only slower.
//
// Keys are sent unescaped. gocloud stores a key under a hex-escaped name only when it holds
// "__0x<hex>__" or, on Azure, one of `"#%?` (everything else it escapes, CheckKey rejects);
// such a key lists where its escaped name sorts, which can differ from its key order, so a
// cursor may step over it (docs/STORAGE.md §6). Walkeeper's own keys are plain
// unless a store name holds "__0x<hex>__".
func (g *gocloudBackend) listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error {
	opts := &blob.ListOptions{Prefix: prefix}
	if startAfter != "" {
		opts.BeforeList = startAfterHook(startAfter)
	}
	return g.eachListed(ctx, opts, func(obj *blob.ListObject) error {
		if obj.IsDir || isTempKey(obj.Key) || obj.Key <= startAfter {
			return nil
		}
		return fn(ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
	})
}

// startAfterHook is a gocloud BeforeList that makes the driver's first list request start
// after key. It is called before every page request; only the first one (no continuation
// token or marker yet) gets the start key, the others resume where the storage left off.
func startAfterHook(key string) func(as func(any) bool) error {
	return func(as func(any) bool) error {
		var s3v2 *s3.ListObjectsV2Input
		if as(&s3v2) {
			if s3v2.ContinuationToken == nil {
				s3v2.StartAfter = &key
			}
			return nil
		}
		var s3v1 *s3.ListObjectsInput
		if as(&s3v1) {
			if s3v1.Marker == nil {
				s3v1.Marker = &key
			}
			return nil
		}
		var q *storage.Query
		if as(&q) {
			q.StartOffset = key
			return nil
		}
		var az *container.ListBlobsHierarchyOptions
		if as(&az) {
			if az.Marker == nil {
				az.StartFrom = &key
			}
			return nil
		}
		return nil
	}
}
