package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
)

// TestListPageS3RequestsPerPage: on s3:// a ListPageWhere page deep into a prefix costs one
// ListObjectsV2 request (StartAfter), however many keys sort before the cursor. Counted at
// the HTTP server, so the SDK's own paging is visible.
func TestListPageS3RequestsPerPage(t *testing.T) {
	s3test.SetCredentials(t)
	backend := s3mem.New()
	var lists atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2" {
			lists.Add(1)
		}
		s3test.NewHandler(backend).ServeHTTP(w, r)
	}))
	defer srv.Close()
	bucket := s3test.NewBucketName()
	require.NoError(t, backend.CreateBucket(bucket))
	ctx := context.Background()
	b := open(t, s3test.BucketURL(srv.URL, bucket))
	// Written to the server's backend directly: the requests counted are the listings.
	const n = 3000
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("_registry/generic/s%05d.json", i)
		_, err := backend.PutObject(bucket, key, nil, bytes.NewReader(nil), 0, nil)
		require.NoError(t, err)
	}
	// One request per page at any depth, not a stream of the whole prefix (n/1000 requests).
	for _, start := range []int{0, 1500, 2900} {
		before := lists.Load()
		objs, _, err := b.ListPageWhere(ctx, "_registry/generic/", fmt.Sprintf("_registry/generic/s%05d.json", start), 100, nil)
		require.NoError(t, err)
		require.Len(t, objs, min(100, n-1-start), "page after %d", start)
		require.Equal(t, fmt.Sprintf("_registry/generic/s%05d.json", start+1), objs[0].Key, "page after %d", start)
		require.Equal(t, int64(1), lists.Load()-before, "page after %d: list requests", start)
	}
	// A whole paged walk costs about n/limit requests, not (n/limit)·(n/1000).
	before := lists.Load()
	after, pages, seen := "", 0, 0
	for {
		objs, more, err := b.ListPageWhere(ctx, "_registry/generic/", after, 500, nil)
		require.NoError(t, err)
		pages++
		seen += len(objs)
		if !more {
			break
		}
		after = objs[len(objs)-1].Key
	}
	require.Equal(t, n, seen, "keys the paged walk saw")
	require.Equal(t, int64(pages), lists.Load()-before, "a paged walk's list requests, one per page")
}
