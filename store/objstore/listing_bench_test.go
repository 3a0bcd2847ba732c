package objstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// BenchmarkListPageMem: one ListPageWhere page of 500 under a small prefix (1000 keys) of a mem://
// bucket that holds 100k or 1M objects in all, the fleet benchmark's registry shape.
//
//	go test -run '^$' -bench BenchmarkListPageMem -benchtime 10x -benchmem ./store/objstore/
func BenchmarkListPageMem(b *testing.B) {
	for _, total := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("objects=%d", total), func(b *testing.B) {
			ctx := context.Background()
			bkt := filledMemBucket(b, fmt.Sprintf("mem://bench-listpage-%d", total), total, func(i int) string {
				if i < 1000 {
					return fmt.Sprintf("_demand/generic/s%07d", i)
				}
				return fmt.Sprintf("_registry/generic/s%07d.json", i)
			})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				objs, _, err := bkt.ListPageWhere(ctx, "_demand/generic/", "_demand/generic/s0000250", 500, nil)
				if err != nil || len(objs) != 500 {
					b.Fatalf("ListPageWhere: %d, %v", len(objs), err)
				}
			}
		})
	}
}

// BenchmarkPutThenListMem: a write followed by a small listing in a mem:// bucket of 100k or
// 1M objects, the shape of a seal (generation, demand record, manifest) in the fleet
// benchmark's 1M-store root. Each op must cost what an object store's would, not the size of
// the bucket.
//
//	go test -run '^$' -bench BenchmarkPutThenListMem -benchtime 200x ./store/objstore/
func BenchmarkPutThenListMem(b *testing.B) {
	for _, total := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("objects=%d", total), func(b *testing.B) {
			ctx := context.Background()
			bkt := filledMemBucket(b, fmt.Sprintf("mem://bench-putlist-%d", total), total, func(i int) string {
				return fmt.Sprintf("_registry/generic/s%07d.json", i)
			})
			if _, _, err := bkt.ListPageWhere(ctx, "_registry/", "", 1, nil); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := bkt.Put(ctx, fmt.Sprintf("generic/s%07d/wal/g%04d", i%1000, i), nil); err != nil {
					b.Fatal(err)
				}
				objs, _, err := bkt.ListPageWhere(ctx, fmt.Sprintf("generic/s%07d/wal/", i%1000), "", 100, nil)
				if err != nil || len(objs) == 0 {
					b.Fatalf("ListPageWhere: %d, %v", len(objs), err)
				}
			}
		})
	}
}

// filledMemBucket opens the mem:// bucket url with n empty objects named keyOf(0..n-1), the
// fleet-sized root both benchmarks list in; it is closed when the benchmark ends.
func filledMemBucket(b *testing.B, url string, n int, keyOf func(i int) string) *objstore.Bucket {
	b.Helper()
	ctx := context.Background()
	bkt, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bkt.Close() })
	for i := 0; i < n; i++ {
		if err := bkt.Put(ctx, keyOf(i), nil); err != nil {
			b.Fatal(err)
		}
	}
	return bkt
}
