package store

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// A storage server that answers what no S3 server sends failed the operation, seen only in
// the log and failed activities: the DB counts each such operation in
// walkeeper_storage_answers_refused_total{reason}, which WalkeeperStorageAnswersRefused alerts
// on, and starts every reason at 0 so the alert's increase sees the first one.
func TestStorageAnswersRefusedAreCounted(t *testing.T) {
	s3test.SetCredentials(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// A truncated listing page without the token to go on: a malformed listing.
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` +
			`<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>` +
			`<KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated></ListBucketResult>`))
	}))
	t.Cleanup(srv.Close)
	m := NewMetrics(prometheus.NewRegistry(), nil)
	for _, reason := range objstore.RefusedReasons() {
		require.Zero(t, testutil.ToFloat64(m.StorageAnswersRefused.WithLabelValues(reason)), reason)
	}
	db := openTestDB(t, s3test.BucketURL(srv.URL, "b"), "w1", func(o *Options) { o.Metrics = m })

	require.ErrorContains(t, errOf(db.ListStores(context.Background(), KindGeneric, "", 10)), "storage answered a malformed listing")
	require.Equal(t, 1.0, testutil.ToFloat64(m.StorageAnswersRefused.WithLabelValues(objstore.RefusedMalformedListing)))
	require.Equal(t, len(objstore.RefusedReasons()), testutil.CollectAndCount(m.StorageAnswersRefused),
		"no reason but the listed ones")
}
