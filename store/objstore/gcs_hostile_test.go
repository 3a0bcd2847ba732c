package objstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
	_, err := walkAtMost(t, b, "p/", 10)
	require.ErrorContains(t, err, "malformed listing")
	_, _, err = b.ListPageWhere(context.Background(), "p/", "", 100, nil)
	require.ErrorContains(t, err, "malformed listing")
}

// A well-formed answer lists as it is, so that the checks below refuse only what is broken.
func TestGCSListingWellFormedPasses(t *testing.T) {
	var requests atomic.Int64
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			gcsListAnswer(w, []gcsItem{{name: "p/a"}, {name: "p/b"}}, nil, "next")
			return
		}
		gcsListAnswer(w, []gcsItem{{name: "p/c"}}, nil, "")
	})
	keys, err := walkAtMost(t, b, "p/", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"p/a", "p/b", "p/c"}, keys)

	// Names and prefixes, each kind in order, across driver pages.
	requests.Store(0)
	b = openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
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
			b := openHostileGCS(t, answer)
			_, err := walkAtMost(t, b, "p/", 1000)
			require.ErrorContains(t, err, "malformed listing")
			_, _, err = b.ListPageWhere(context.Background(), "p/", "", objstore.MaxListPage, nil)
			require.ErrorContains(t, err, "malformed listing")
			_, err = b.List(context.Background(), "p/")
			require.ErrorContains(t, err, "malformed listing")
		})
	}
}

// A delimiter listing likewise: a server repeating a page of prefixes made ListDirs endless,
// its result growing all the while. The GCS client fills a driver page of 1,000 entries
// before gocloud sees any, so the listing fails after 500 requests of two prefixes; the
// server refuses the 1,001st, so that an endless listing ends the test instead of hanging it.
func TestGCSListingDirsRepeatedFails(t *testing.T) {
	var requests atomic.Int64
	b := openHostileGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1000 {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		gcsListAnswer(w, nil, []string{"p/a/", "p/b/"}, "same")
	})
	_, err := b.ListDirs(context.Background(), "p/")
	require.ErrorContains(t, err, "malformed listing")
	require.Equal(t, int64(500), requests.Load(), "the listing ends at its first driver page")
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

// hugeErrorBody answers with status and an error body of 1 MiB.
func hugeErrorBody(status int) http.HandlerFunc {
	body := strings.Repeat("x", 1<<20)
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// The GCS client puts an error answer's whole body into its error's text, which a log line or
// an activity failure then carried whole; the text is cut, the error still classified.
func TestGCSHugeErrorBodyIsCutFromTheError(t *testing.T) {
	ctx := context.Background()
	_, err := walkAtMost(t, openHostileGCS(t, hugeErrorBody(http.StatusForbidden)), "p/", 10)
	require.Error(t, err)
	require.Less(t, len(err.Error()), 5<<10, "the error's text")
	_, err = openHostileGCS(t, hugeErrorBody(http.StatusNotFound)).GetAtMost(ctx, "p/a", 100, nil)
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.Less(t, len(err.Error()), 5<<10, "the error's text")
}
