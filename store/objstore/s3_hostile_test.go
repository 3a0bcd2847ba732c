package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// requireEmptyPagesBounded opens a bucket on a server answering every listing request with
// the empty page emptyPage writes, each promising more under a fresh token (n counts the
// requests), and requires each kind of listing to fail at the 1,001st. The server refuses the
// 3,001st request, so that an endless listing ends the test instead of hanging it.
func requireEmptyPagesBounded(t *testing.T, open func(*testing.T, http.HandlerFunc) *objstore.Bucket,
	emptyPage func(w http.ResponseWriter, n int64)) {
	var requests atomic.Int64
	b := open(t, func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		if n > 3000 {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		emptyPage(w, n)
	})
	ctx := context.Background()
	for _, list := range []struct {
		name string
		run  func() error
	}{
		{"Walk", func() error { _, err := walkAtMost(t, b, "p/", 0); return err }},
		{"ListPageWhere", func() error { _, _, err := b.ListPageWhere(ctx, "p/", "p/a", 10, nil); return err }},
		{"ListDirs", func() error { _, err := b.ListDirs(ctx, "p/"); return err }},
	} {
		requests.Store(0)
		require.ErrorContains(t, list.run(), "more than 1000 empty pages in a row", list.name)
		require.Equal(t, int64(1001), requests.Load(), "%s ends at the 1,001st empty page", list.name)
	}
}

// requireRepeatedDirsPageFails opens a bucket whose server answers each listing with the page
// of prefixes p/a/ and p/b/ that dirsPage writes under one token for ever, refusing the
// 1,001st request so that an endless listing ends the test instead of hanging it, and wants
// ListDirs to fail after requests requests.
func requireRepeatedDirsPageFails(t *testing.T, open func(*testing.T, http.HandlerFunc) *objstore.Bucket,
	dirsPage func(w http.ResponseWriter), requests int64, why string) {
	t.Helper()
	var asked atomic.Int64
	b := open(t, func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) > 1000 {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		dirsPage(w)
	})
	_, err := b.ListDirs(context.Background(), "p/")
	require.ErrorContains(t, err, "malformed listing")
	require.Equal(t, requests, asked.Load(), why)
}

// A server's listing that leaves out a key's LastModified made gocloud's s3blob dereference
// nil and panic, which ended the process; the listing fails instead.
func TestS3ListingWithoutLastModifiedFails(t *testing.T) {
	b := openHostileS3(t, func(w http.ResponseWriter, r *http.Request) {
		listAnswer(w, []listedKey{{key: "p/a", noLastModified: true}}, nil, false, "")
	})
	requireKeyListingsFail(t, b, "malformed listing")
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
			requireKeyListingsFail(t, openHostileS3(t, answer), "malformed listing")
		})
	}
}

// A delimiter listing likewise: a server repeating a page of common prefixes made ListDirs
// endless, its result growing all the while. The server refuses the 1,001st request, so that
// an endless listing ends the test instead of hanging it.
func TestS3ListingDirsRepeatedFails(t *testing.T) {
	requireRepeatedDirsPageFails(t, openHostileS3, func(w http.ResponseWriter) {
		listAnswer(w, nil, []string{"p/a/", "p/b/"}, true, "same")
	}, 2, "the listing ends at the repeated page")
}

// requireEveryListingFails runs each kind of listing of prefix p/ and wants it to fail with
// an error holding want.
func requireEveryListingFails(t *testing.T, b *objstore.Bucket, want string) {
	t.Helper()
	requireKeyListingsFail(t, b, want)
	_, err := b.ListDirs(context.Background(), "p/")
	require.ErrorContains(t, err, want, "ListDirs")
}

// requireKeyListingsFail runs each listing of the keys under p/ (Walk, ListPageWhere, List)
// and wants it to fail with an error holding want.
func requireKeyListingsFail(t *testing.T, b *objstore.Bucket, want string) {
	t.Helper()
	ctx := context.Background()
	_, err := walkAtMost(t, b, "p/", 1000)
	require.ErrorContains(t, err, want, "Walk")
	_, _, err = b.ListPageWhere(ctx, "p/", "", objstore.MaxListPage, nil) // past a first page
	require.ErrorContains(t, err, want, "ListPageWhere")
	_, err = b.List(ctx, "p/")
	require.ErrorContains(t, err, want, "List")
}

// A 200 to a listing whose body is not a ListBucketResult (an S3 <Error> document, or
// nothing) decoded as an empty listing, a silent short answer.
func TestS3ListingThatIsNotAListingFails(t *testing.T) {
	for name, body := range map[string]string{
		"error document": `<?xml version="1.0" encoding="UTF-8"?>` +
			`<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>`,
		"empty body": "",
	} {
		t.Run(name, func(t *testing.T) {
			b := openHostileS3(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/xml")
				_, _ = fmt.Fprint(w, body)
			})
			requireEveryListingFails(t, b, "malformed listing")
		})
	}
}

// A truncated page without a NextContinuationToken ended the listing there, silently.
func TestS3ListingTruncatedWithoutTokenFails(t *testing.T) {
	b := openHostileS3(t, func(w http.ResponseWriter, r *http.Request) {
		listAnswer(w, []listedKey{{key: "p/a"}}, []string{"p/d/"}, true, "")
	})
	requireEveryListingFails(t, b, "malformed listing")
}

// Each empty page of a truncated listing deepened gocloud's iterator's recursion, for as
// long as the server went on; the listing fails after 1,000 of them in a row.
func TestS3ListingEmptyPagesAreBounded(t *testing.T) {
	requireEmptyPagesBounded(t, openHostileS3, func(w http.ResponseWriter, n int64) {
		listAnswer(w, nil, nil, true, fmt.Sprint(n))
	})
}

// An error answer's body was read whole, and a list page decoded whole, whatever their size:
// an error body is read up to 64 KiB, a list page up to 8 MiB, and neither is asked again.
// Every request with an answer body is tried: a head's answer has none (HTTP), so the server
// finds every object present, and a delete gets past gocloud's head to its DeleteObject.
func TestS3AnswersAreReadUpToALimit(t *testing.T) {
	ctx := context.Background()
	t.Run("error answer of 64 MiB", func(t *testing.T) {
		var requests atomic.Int64
		b := openHostileS3(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead {
				w.Header().Set("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT")
				w.Header().Set("Content-Length", "1")
				return
			}
			requests.Add(1)
			// Closed after the answer: a connection the client abandoned mid-body and reused
			// would fail the next request's first attempt, which net/http sends again.
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable) // which the SDK retries
			_, _ = fmt.Fprint(w, "<Error><Code>SlowDown</Code><Message>")
			chunk := bytes.Repeat([]byte{'x'}, 64<<10)
			for range 1024 {
				if _, err := w.Write(chunk); err != nil {
					return // the client stopped reading
				}
			}
		})
		ops := bucketOps(b)
		delete(ops, "exists") // a head's answer has no body
		// Read whole, the body took about twice its 64 MiB; a bound of 16 MiB leaves the
		// SDK's own allocations room.
		requireAnswersRefusedOnce(t, ops, &requests, 16<<20)
	})
	t.Run("list page of 15 MB", func(t *testing.T) {
		keys := make([]listedKey, 100_000)
		for i := range keys {
			keys[i] = listedKey{key: fmt.Sprintf("p/%07d", i)}
		}
		b := openHostileS3(t, func(w http.ResponseWriter, r *http.Request) {
			listAnswer(w, keys, nil, false, "")
		})
		_, err := b.List(ctx, "p/")
		require.ErrorContains(t, err, "answer longer than 8388608 bytes")
	})
}

// bucketOps are the Bucket's operations that send a request, each on p/a or under p/.
func bucketOps(b *objstore.Bucket) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"list":          func() error { _, err := b.List(ctx, "p/"); return err },
		"get":           func() error { _, err := b.Get(ctx, "p/a"); return err },
		"exists":        func() error { _, err := b.Exists(ctx, "p/a"); return err },
		"put":           func() error { return b.Put(ctx, "p/a", []byte("x")) },
		"put if absent": func() error { return b.PutIfAbsent(ctx, "p/a", []byte("x")) },
		"put from": func() error {
			_, err := b.PutFrom(ctx, "p/a", func(w io.Writer) error {
				_, err := io.WriteString(w, "x")
				return err
			})
			return err
		},
		"delete": func() error { return b.Delete(ctx, "p/a") },
	}
}

// requireAnswersRefusedOnce runs each of ops against a server that answers with a body (an
// error's, or a put's or delete's on Azure) far past 64 KiB, counting its requests in requests: each must fail on the body's limit
// after one request, having allocated less than bound bytes.
func requireAnswersRefusedOnce(t *testing.T, ops map[string]func() error, requests *atomic.Int64, bound uint64) {
	for op, run := range ops {
		t.Run(op, func(t *testing.T) {
			requests.Store(0)
			var err error
			allocated := objstore.TotalAlloc(func() { err = run() })
			t.Logf("%d bytes allocated", allocated)
			require.Less(t, allocated, bound, "bytes allocated")
			require.ErrorContains(t, err, "answer longer than 65536 bytes")
			// The SDK retries a request whose connection the server's close broke before the
			// answer reached it, a transport failure the race detector's timing brings out on
			// S3 puts; a retried refusal would be asked three times or more.
			require.LessOrEqual(t, requests.Load(), int64(2), "a refused answer is not asked again")
			require.Positive(t, requests.Load())
		})
	}
}
