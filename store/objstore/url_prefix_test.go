package objstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
)

// requestPaths serves every request 404 and records its escaped path.
func requestPaths(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
}

// The S3, GCS and Azure buckets are opened on clients of walkeeper's own (their answers bounded
// and checked), under gocloud's URL mux: a storage URL's prefix= still roots every key, as two
// roots sharing a bucket need.
func TestPrefixParameterRootsEveryKey(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		open   func(t *testing.T, endpoint string) string
		want   string // the key "k" under prefix "root/", as its request's path holds it
	}{
		{"s3", func(t *testing.T, endpoint string) string {
			s3test.SetCredentials(t)
			return s3test.BucketURL(endpoint, "b") + "&prefix=root/"
		}, "/b/root/k"},
		{"gs", func(t *testing.T, endpoint string) string {
			t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(endpoint, "http://"))
			return "gs://b?prefix=root/"
		}, "/o/root%2Fk"},
		{"azblob", func(t *testing.T, endpoint string) string {
			// The account is TestMain's; a 127.0.0.1 domain puts it in the path.
			return "azblob://b?protocol=http&domain=" + strings.TrimPrefix(endpoint, "http://") + "&prefix=root/"
		}, "/devstoreaccount1/b/root%2Fk"},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			srv, paths := requestPaths(t)
			b := open(t, tc.open(t, srv.URL))
			if ok, err := b.Exists(context.Background(), "k"); ok || err != nil {
				t.Fatalf("Exists on a server that knows nothing: %v, %v", ok, err)
			}
			got := paths()
			if len(got) == 0 || !strings.HasSuffix(got[0], tc.want) {
				t.Fatalf("requests %q, want the first to end in %q", got, tc.want)
			}
		})
	}
}
