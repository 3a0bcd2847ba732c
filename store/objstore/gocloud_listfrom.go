package objstore

import (
	"context"
	"fmt"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// listFrom starts the storage's own listing at startAfter (S3 StartAfter, GCS StartOffset,
// Azure startFrom), on the first request only, so a page costs about one list request whatever
// the prefix holds; keys up to startAfter are skipped here too, for a server that ignores it.
// Keys are sent unescaped, so a key gocloud stores hex-escaped may be stepped over
// (docs/STORAGE.md §6); walkeeper's own keys are plain unless a store name holds "__0x<hex>__".
func (g *gocloudBackend) listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error {
	opts := &blob.ListOptions{Prefix: prefix}
	return g.eachListed(ctx, opts, startAfter, func(obj *blob.ListObject) error {
		if obj.IsDir || isTempKey(obj.Key) || obj.Key <= startAfter {
			return nil
		}
		if obj.ModTime.IsZero() {
			// A GCS item without "updated" reads as year 1, which the orphan rules take for old.
			return fmt.Errorf("%w: key %q without a modification time", errBadListing, obj.Key)
		}
		return fn(ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
	})
}

// startListAfter, run by a listing's BeforeList, makes the driver's first list request (no
// continuation token or marker yet) start after key. S3 is listed with ListObjectsV2 only:
// s3blob's legacy ListObjects is an option no storage URL sets.
func startListAfter(as func(any) bool, key string) {
	var s3v2 *s3.ListObjectsV2Input
	var q *storage.Query
	var az *container.ListBlobsHierarchyOptions
	switch {
	case as(&s3v2):
		if s3v2.ContinuationToken == nil {
			s3v2.StartAfter = &key
		}
	case as(&q):
		q.StartOffset = key
	case as(&az):
		if az.Marker == nil {
			az.StartFrom = &key
		}
	}
}
