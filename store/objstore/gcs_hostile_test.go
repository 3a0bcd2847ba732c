package objstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// gcsItem is one object of a hostile GCS server's listing answer.
type gcsItem struct {
	name      string
	noUpdated bool // leave out "updated", which GCS always sends
}

// gcsListAnswer writes a JSON API objects.list answer holding items and prefixes.
func gcsListAnswer(w http.ResponseWriter, items []gcsItem, prefixes []string, token string) {
	answer := map[string]any{"kind": "storage#objects", "prefixes": prefixes}
	if token != "" {
		answer["nextPageToken"] = token
	}
	var objs []map[string]any
	for _, it := range items {
		o := map[string]any{"kind": "storage#object", "bucket": "b", "name": it.name, "size": "1", "generation": "1"}
		if !it.noUpdated {
			o["updated"] = "2026-01-01T00:00:00.000Z"
		}
		objs = append(objs, o)
	}
	answer["items"] = objs
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// gcsDriverPage is a whole driver page of items: 1,000 names under prefix.
func gcsDriverPage(prefix string) []gcsItem {
	items := make([]gcsItem, 1000)
	for i := range items {
		items[i].name = fmt.Sprintf("%s%04d", prefix, i)
	}
	return items
}

// openHostileGCS opens bucket "b" through the GCS emulator setting on a server that answers
// every request with answer (JSON API at /storage/v1/, reads at /b/KEY).
func openHostileGCS(t *testing.T, answer http.HandlerFunc) *objstore.Bucket {
	t.Helper()
	srv := httptest.NewServer(answer)
	t.Cleanup(srv.Close)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	return open(t, "gs://b")
}

// A GCS item without "updated" was listed with a zero ModTime, the year 1, which the demand
// index's orphan clean-up takes for an old record and deletes; the listing fails instead.
func TestGCSListingWithoutUpdatedFails(t *testing.T) {
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		gcsListAnswer(w, []gcsItem{{name: "p/a", noUpdated: true}}, nil, "")
	})
	requireKeyListingsFail(t, b, "malformed listing")
}

// A well-formed answer lists as it is, so that the checks below refuse only what is broken.
func TestGCSListingWellFormedPasses(t *testing.T) {
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("pageToken") == "" {
			gcsListAnswer(w, []gcsItem{{name: "p/a"}, {name: "p/b"}}, nil, "next")
			return
		}
		gcsListAnswer(w, []gcsItem{{name: "p/c"}}, nil, "")
	})
	keys, err := walkAtMost(t, b, "p/", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"p/a", "p/b", "p/c"}, keys)

	// Names and prefixes, each kind in order, across driver pages.
	b = openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("pageToken") == "" {
			gcsListAnswer(w, gcsDriverPage("p/a"), []string{"p/b/"}, "next")
			return
		}
		gcsListAnswer(w, []gcsItem{{name: "p/c"}}, []string{"p/d/"}, "")
	})
	dirs, err := b.ListDirs(context.Background(), "p/")
	require.NoError(t, err)
	require.Equal(t, []string{"b", "d"}, dirs)
}

// A listing must hold only names under its prefix, each after the one before: a server
// repeating a page under the same nextPageToken made a walk endless, and names out of order
// or listed twice were taken as objects. (gcsblob sorts each driver page of 1,000 entries,
// however many answers the GCS client took to fill it, so disorder shows only across them.)
func TestGCSListingOutOfPrefixOrOrderFails(t *testing.T) {
	for name, answer := range map[string]http.HandlerFunc{
		"same page for ever": func(w http.ResponseWriter, r *http.Request) {
			gcsListAnswer(w, []gcsItem{{name: "p/a"}, {name: "p/b"}}, nil, "same")
		},
		"outside the prefix": func(w http.ResponseWriter, r *http.Request) {
			gcsListAnswer(w, []gcsItem{{name: "p/a"}, {name: "q/x"}}, nil, "")
		},
		"without a name": func(w http.ResponseWriter, r *http.Request) {
			gcsListAnswer(w, []gcsItem{{name: "p/a"}, {name: ""}}, nil, "")
		},
		"out of order across pages": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("pageToken") == "" {
				gcsListAnswer(w, gcsDriverPage("p/c"), nil, "next")
				return
			}
			gcsListAnswer(w, []gcsItem{{name: "p/a"}}, nil, "")
		},
		"twice": func(w http.ResponseWriter, r *http.Request) {
			gcsListAnswer(w, []gcsItem{{name: "p/a"}, {name: "p/a"}}, nil, "")
		},
	} {
		t.Run(name, func(t *testing.T) {
			requireKeyListingsFail(t, openHostileGCS(t, answer), "malformed listing")
		})
	}
}

// A delimiter listing likewise: a server repeating a page of prefixes made ListDirs endless,
// its result growing all the while. The GCS client fills a driver page of 1,000 entries
// before gocloud sees any, so the listing fails after 500 requests of two prefixes; the
// server refuses the 1,001st, so that an endless listing ends the test instead of hanging it.
func TestGCSListingDirsRepeatedFails(t *testing.T) {
	requireRepeatedDirsPageFails(t, openHostileGCS, func(w http.ResponseWriter) {
		gcsListAnswer(w, nil, []string{"p/a/", "p/b/"}, "same")
	}, 500, "the listing ends at its first driver page")
}

// The GCS client asks again after an empty answer with a fresh nextPageToken, within one
// driver page and without returning, for as long as the server went on: until the stall
// timeout. The listing fails after 1,000 such answers in a row.
func TestGCSListingEmptyPagesAreBounded(t *testing.T) {
	requireEmptyPagesBounded(t, openHostileGCS, func(w http.ResponseWriter, n int64) {
		gcsListAnswer(w, nil, nil, fmt.Sprint("t", n))
	})
}

// Empty answers are bounded in a row only: an answer with an entry starts the count again,
// though the GCS client has not yet handed a driver page to the listing.
func TestGCSListingEmptyPagesBetweenEntriesPass(t *testing.T) {
	var requests atomic.Int64
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		switch n := requests.Add(1); {
		case n == 1000:
			gcsListAnswer(w, []gcsItem{{name: "p/a"}}, nil, fmt.Sprint("t", n))
		case n == 2000:
			gcsListAnswer(w, []gcsItem{{name: "p/b"}}, nil, "")
		default:
			gcsListAnswer(w, nil, nil, fmt.Sprint("t", n))
		}
	})
	keys, err := walkAtMost(t, b, "p/", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"p/a", "p/b"}, keys)
}

// The GCS client turns a null list entry into a nil object and an ACL entry of null into a
// nil dereference: the listing and the existence check fail, the process lives on.
func TestGCSNullEntriesFail(t *testing.T) {
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/storage/v1/b/b/o" {
			_, _ = w.Write([]byte(`{"kind":"storage#objects","items":[null]}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"storage#object","name":"p/a","acl":[null]}`))
	})
	_, err := walkAtMost(t, b, "p/", 10)
	require.ErrorContains(t, err, "malformed listing")
	_, err = b.Exists(context.Background(), "p/a")
	require.ErrorContains(t, err, "malformed response")
}

// Answers that do not parse, and a read whose body ends before its declared length, are
// errors, not empty or short results.
func TestGCSMalformedAnswersFail(t *testing.T) {
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/storage/v1/") {
			_, _ = w.Write([]byte(`{"kind":"storage#objects","items":[{"name":`))
			return
		}
		w.Header().Set("Content-Length", "10")
		_, _ = w.Write([]byte("abc")) // then the server closes the connection
	})
	ctx := context.Background()
	_, err := walkAtMost(t, b, "p/", 10)
	require.ErrorContains(t, err, "unexpected end of JSON input")
	_, err = b.ListDirs(ctx, "p/")
	require.ErrorContains(t, err, "unexpected end of JSON input")
	_, err = b.Exists(ctx, "p/a")
	require.ErrorContains(t, err, "unexpected end of JSON input")
	_, err = b.GetAtMost(ctx, "p/a", 100, nil)
	require.Error(t, err)
}

// hugeErrorBody answers with status and an error body of 60 KiB: far past the 4 KiB an
// error's text keeps, within the 64 KiB a gs:// error answer may hold.
func hugeErrorBody(status int) http.HandlerFunc {
	body := strings.Repeat("x", 60<<10)
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// The GCS client puts an error answer's whole body into its error's text, which a log line or
// an activity failure then carried whole; the text is cut, the error still classified.
func TestGCSHugeErrorBodyIsCutFromTheError(t *testing.T) {
	ctx := context.Background()
	_, err := walkAtMost(t, openHostileGCS(t, hugeErrorBody(http.StatusBadRequest)), "p/", 10)
	require.Error(t, err)
	require.Less(t, len(err.Error()), 5<<10, "the error's text")
	_, err = openHostileGCS(t, hugeErrorBody(http.StatusNotFound)).GetAtMost(ctx, "p/a", 100, nil)
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.Less(t, len(err.Error()), 5<<10, "the error's text")
}

// The GCS client decodes an upload's answer on its own goroutine, where an ACL entry of null
// was a nil dereference no recover reaches: the process ended. Every upload now fails.
func TestGCSUploadAnswerWithNullACLFails(t *testing.T) {
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"storage#object","bucket":"b","name":"p/a","acl":[null]}`))
	})
	for op, run := range bucketOps(b) {
		if strings.HasPrefix(op, "put") { // put, put if absent, put from
			t.Run(op, func(t *testing.T) { require.ErrorContains(t, run(), "malformed response") })
		}
	}
}

// The GCS client read an error answer's body whole (64 MiB took 384 MB) and retried a 503 as
// often as its policy allows, reading each body again; now it reads 64 KiB and one byte of
// it, once, and the operation fails.
func TestGCSErrorAnswerIsReadUpToALimit(t *testing.T) {
	var requests atomic.Int64
	b := openHostileGCS(t, hugeAnswer(&requests, http.StatusServiceUnavailable)) // which the GCS client retries
	// Read whole, the body took about 384 MB; an upload allocates the GCS writer's 16 MiB
	// chunk buffer of its own, so the bound is 32 MiB.
	requireAnswersRefusedOnce(t, bucketOps(b), &requests, 32<<20)
}

// A 200 to a listing that is not a storage#objects (an error document) read as an empty
// listing, which the demand index's clean-up would act on; it fails.
func TestGCSListingThatIsNotAListingFails(t *testing.T) {
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"error":{"code":403,"message":"denied"}}`))
	})
	requireEveryListingFails(t, b, "malformed listing")
}

// The GCS client decoded a list page whole, whatever its size (100,000 entries took 160 MB);
// a page holding more items than the request's maxResults fails.
func TestGCSListingPageLargerThanAskedFails(t *testing.T) {
	var requests atomic.Int64
	items := make([]gcsItem, 100_000)
	for i := range items {
		items[i].name = fmt.Sprintf("p/%07d", i)
	}
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		gcsListAnswer(w, items, nil, "")
	})
	_, err := b.List(context.Background(), "p/")
	require.ErrorContains(t, err, "malformed listing")
	require.ErrorContains(t, err, "100000 items in a page of at most 1000")
	require.Equal(t, int64(1), requests.Load())
}

// The GCS client reopens a read whose body breaks off at once, without backoff or limit, and
// an object read from its start asks for no range, so that each reopening looked like a new
// read: a body ending before its first byte was asked again about 500 times a second until
// --storage-stall-timeout. The read now fails after four reopenings. The server refuses the
// 1,001st request, so that an endless read ends the test instead of hanging it.
func TestGCSReadBreakingOffIsReopenedAFewTimes(t *testing.T) {
	var requests atomic.Int64
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1000 {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusOK) // then no byte: the server closes the connection
	})
	start := time.Now()
	_, err := b.GetAtMost(context.Background(), "p/a", 100, nil)
	require.ErrorContains(t, err, "malformed response")
	require.ErrorContains(t, err, "broke off 5 times in one read")
	require.Equal(t, int64(5), requests.Load(), "the read and its four reopenings")
	require.Less(t, time.Since(start), waitCap, "the reopenings do not wait out the stall timeout")
}

// A body that breaks off once is reopened where it broke, and the read completes: the bound
// above refuses only a server that breaks every body.
func TestGCSReadBrokenOnceCompletes(t *testing.T) {
	var requests atomic.Int64
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Content-Length", "10")
			_, _ = w.Write([]byte("01234")) // then the server closes the connection
			return
		}
		if r.Header.Get("Range") != "bytes=5-" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Range", "bytes 5-9/10")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write([]byte("56789"))
	})
	data, err := b.GetAtMost(context.Background(), "p/a", 100, nil)
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(data))
	require.Equal(t, int64(2), requests.Load())
}

// gocloud's gcsblob takes a GCS 403 for not found, so that a bucket walkeeper may not read
// held no object: an existence check said false, a delete succeeded, a read or a listing
// failed with ErrNotFound (a missing store, which fails a merge for good). GCS answers 404 to
// a caller allowed to see that an object is missing, and 403 only to one that is not allowed:
// each operation now fails with the storage's refusal, GCS's reason in its text.
func TestGCSForbiddenIsNotNotFound(t *testing.T) {
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/storage/v1/") || strings.HasPrefix(r.URL.Path, "/upload/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"code":403,"message":"sa@p.iam does not have storage.objects.get access"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code>` +
			`<Message>Access denied.</Message><Details>sa@p.iam does not have storage.objects.get access</Details></Error>`))
	})
	ctx := context.Background()
	ok, err := b.Exists(ctx, "p/a")
	require.False(t, ok)
	requireForbidden(t, err)
	requireForbidden(t, b.Delete(ctx, "p/a"))
	_, err = b.Get(ctx, "p/a")
	requireForbidden(t, err)
	_, err = b.List(ctx, "p/")
	requireForbidden(t, err)
	_, err = b.ListDirs(ctx, "p/")
	requireForbidden(t, err)
	requireForbidden(t, b.PutIfAbsent(ctx, "p/a", []byte("x")))
}

func requireForbidden(t *testing.T, err error) {
	t.Helper()
	require.ErrorContains(t, err, "storage refused access")
	require.ErrorContains(t, err, "does not have storage.objects.get access")
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	require.NotErrorIs(t, err, objstore.ErrAlreadyExists)
}

// The GCS client retries an error whose text holds "connection reset", "broken pipe" or the
// like (storage.ShouldRetry), and a 403's error quoted GCS's reason: a refusal whose reason
// said so was asked again, with backoff, until --storage-stall-timeout (a listing, a read, an
// existence check and a conditional put, 4 to 6 times in a stall timeout of 3 s). Each
// operation now fails after one request, the reason still in its text.
func TestGCSForbiddenIsNotRetriedWhateverItsReason(t *testing.T) {
	const reason = "read: connection reset by peer; broken pipe; server closed idle connection"
	var requests atomic.Int64
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, `{"error":{"code":403,"message":%q}}`, reason)
	}).WithStallTimeout(2 * waitCap)
	for op, run := range bucketOps(b) {
		t.Run(op, func(t *testing.T) {
			requests.Store(0)
			start := time.Now()
			err := run()
			t.Logf("%d requests in %v: %v", requests.Load(), time.Since(start), err)
			require.ErrorContains(t, err, "storage refused access (HTTP 403)")
			require.ErrorContains(t, err, strconv.Quote(reason))
			require.Equal(t, int64(1), requests.Load(), "a refusal is not asked again")
			require.Less(t, time.Since(start), waitCap, "a refusal does not wait out the stall timeout")
		})
	}
}
