package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/walkeeper/walkeeper/internal/testkit/bucketconformance"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// Helpers for this package's tests that need a bucket.

var memSeq atomic.Int64

// newMemURL returns a mem:// URL no other test uses (mem buckets live for the process).
func newMemURL() string { return fmt.Sprintf("mem://blobtest-%d", memSeq.Add(1)) }

// listKeys returns the keys List reports under prefix, never nil.
var listKeys = bucketconformance.ListKeys

// dropMemBucket deletes every object of the mem:// bucket at url, so that a long fuzz run
// does not keep every bucket's bytes alive (mem:// buckets live for the process).
func dropMemBucket(url string) {
	ctx := context.Background()
	b, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		return
	}
	defer b.Close()
	objs, _ := b.List(ctx, "")
	for _, o := range objs {
		_ = b.Delete(ctx, o.Key)
	}
}

// keyExists reports whether db's bucket holds key.
func keyExists(t *testing.T, db *DB, key string) bool {
	t.Helper()
	return call(db.bucket.Exists(context.Background(), key)).must(t)
}

// getObject is the object at key in b.
func getObject(t *testing.T, b *objstore.Bucket, key string) []byte {
	t.Helper()
	return call(b.Get(context.Background(), key)).must(t)
}
