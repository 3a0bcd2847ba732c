// Package objstore is the store's only access to object storage: Bucket, over file://,
// mem://, s3://, gs:// and azblob:// (file*.go, mem.go, and gocloud*.go for the last three), with the key rules every backend
// shares (keys.go), fault injection (faults.go; request counting is a Faults, in
// internal/testkit/requestcount) and the listings that stay bounded however many objects a
// prefix holds (listing.go). It knows nothing of stores, rows or manifests: reads take the
// caller's allocator (Alloc) instead.
package objstore
