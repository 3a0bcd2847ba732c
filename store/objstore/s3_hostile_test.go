package objstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// listedKey is one entry of a hostile server's listing answer.
type listedKey struct {
	key            string
	noLastModified bool // leave out LastModified, which S3 always sends
}

// listAnswer writes a ListObjectsV2 answer holding keys and common prefixes dirs.
func listAnswer(w http.ResponseWriter, keys []listedKey, dirs []string, truncated bool, token string) {
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` +
		`<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>`)
	fmt.Fprintf(&sb, "<KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>%v</IsTruncated>",
		len(keys), truncated)
	if token != "" {
		fmt.Fprintf(&sb, "<NextContinuationToken>%s</NextContinuationToken>", token)
	}
	for _, k := range keys {
		sb.WriteString("<Contents><Key>" + k.key + "</Key>")
		if !k.noLastModified {
			sb.WriteString("<LastModified>2026-01-01T00:00:00.000Z</LastModified>")
		}
		sb.WriteString(`<ETag>"00"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>`)
	}
	for _, d := range dirs {
		sb.WriteString("<CommonPrefixes><Prefix>" + d + "</Prefix></CommonPrefixes>")
	}
	sb.WriteString("</ListBucketResult>")
	w.Header().Set("Content-Type", "application/xml")
	_, _ = fmt.Fprint(w, sb.String())
}

// openHostileS3 opens bucket "b" on a server that answers every request with answer.
func openHostileS3(t *testing.T, answer http.HandlerFunc) *objstore.Bucket {
	t.Helper()
	s3test.SetCredentials(t)
	srv := httptest.NewServer(answer)
	t.Cleanup(srv.Close)
	return open(t, s3test.BucketURL(srv.URL, "b"))
}

// walkAtMost walks prefix, failing the test once the walk has seen more than n objects, so
// that an endless walk ends the test instead of hanging it.
func walkAtMost(t *testing.T, b *objstore.Bucket, prefix string, n int) ([]string, error) {
	t.Helper()
	var keys []string
	err := b.Walk(context.Background(), prefix, func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		if len(keys) > n {
			t.Fatalf("walk of %q saw more than %d objects: %q...", prefix, n, keys[:10])
		}
		return nil
	})
	return keys, err
}

// A server's listing that leaves out a key's LastModified made gocloud's s3blob dereference
// nil and panic, which ended the process; the listing fails instead.
func TestS3ListingWithoutLastModifiedFails(t *testing.T) {
	b := openHostileS3(t, func(w http.ResponseWriter, r *http.Request) {
		listAnswer(w, []listedKey{{key: "p/a", noLastModified: true}}, nil, false, "")
	})
	_, err := walkAtMost(t, b, "p/", 10)
	require.ErrorContains(t, err, "malformed listing")
	_, _, err = b.ListPageWhere(context.Background(), "p/", "", 100, nil)
	require.ErrorContains(t, err, "malformed listing")
}

// A listing must hold only keys under its prefix, each after the one before: a server that
// repeats a page under the same continuation token made a walk endless, and keys outside
// the prefix, out of order or listed twice were taken as objects.
func TestS3ListingOutOfPrefixOrOrderFails(t *testing.T) {
	for name, answer := range map[string]http.HandlerFunc{
		"same page for ever": func(w http.ResponseWriter, r *http.Request) {
			listAnswer(w, []listedKey{{key: "p/a"}, {key: "p/b"}}, nil, true, "same")
		},
		"outside the prefix": func(w http.ResponseWriter, r *http.Request) {
			listAnswer(w, []listedKey{{key: "p/a"}, {key: "q/x"}}, nil, false, "")
		},
		"out of order": func(w http.ResponseWriter, r *http.Request) {
			listAnswer(w, []listedKey{{key: "p/c"}, {key: "p/a"}}, nil, false, "")
		},
		"twice": func(w http.ResponseWriter, r *http.Request) {
			listAnswer(w, []listedKey{{key: "p/a"}, {key: "p/a"}}, nil, false, "")
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := openHostileS3(t, answer)
			_, err := walkAtMost(t, b, "p/", 1000)
			require.ErrorContains(t, err, "malformed listing")
			_, _, err = b.ListPageWhere(context.Background(), "p/", "", 100, nil)
			require.ErrorContains(t, err, "malformed listing")
			_, err = b.List(context.Background(), "p/")
			require.ErrorContains(t, err, "malformed listing")
		})
	}
}

// A delimiter listing likewise: a server repeating a page of common prefixes made ListDirs
// endless, its result growing all the while. The server refuses the 1,001st request, so that
// an endless listing ends the test instead of hanging it.
func TestS3ListingDirsRepeatedFails(t *testing.T) {
	var requests atomic.Int64
	b := openHostileS3(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1000 {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		listAnswer(w, nil, []string{"p/a/", "p/b/"}, true, "same")
	})
	_, err := b.ListDirs(context.Background(), "p/")
	require.ErrorContains(t, err, "malformed listing")
	require.Equal(t, int64(2), requests.Load(), "the listing ends at the repeated page")
}
