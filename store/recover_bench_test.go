package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// BenchmarkRecoverRegistry is a worker start's DB.Recover over 2,000 registered stores with
// nothing to replay, each storage request 5 ms (an object store's round trip): what a start
// costs grows with the registry, so it is the listings' concurrency that sets its time.
func BenchmarkRecoverRegistry(b *testing.B) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://bench-recover-%d", time.Now().UnixNano())
	opts := store.DefaultOptions()
	opts.InstanceID = "w1"
	db, err := store.OpenDB(ctx, url, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close(ctx) }()
	for i := range 2000 {
		if _, err := db.Create(ctx, store.Target{Kind: store.KindRollout, Name: fmt.Sprintf("s%05d", i)}, store.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	bucket, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	slow := bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(string, string) error {
		time.Sleep(5 * time.Millisecond)
		return nil
	}})
	start := store.OpenDBOnBucket(slow, opts)
	defer func() { _ = start.Close(ctx) }()
	b.ResetTimer()
	for range b.N {
		if _, err := start.Recover(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
