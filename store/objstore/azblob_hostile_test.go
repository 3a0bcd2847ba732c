package objstore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/testservers"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// azBlob is one blob of a hostile Azure server's listing answer.
type azBlob struct {
	name string
	// properties is the blob's <Properties> content; "" = the usual Last-Modified and
	// Content-Length, "-" = no <Properties> at all.
	properties string
}

const azModified = "Thu, 01 Jan 2026 00:00:00 GMT"

// azListAnswer writes a List Blobs answer holding blobs and blob prefixes.
func azListAnswer(w http.ResponseWriter, blobs []azBlob, prefixes []string, marker string) {
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="x" ContainerName="b"><Blobs>`)
	for _, p := range prefixes {
		sb.WriteString("<BlobPrefix><Name>" + p + "</Name></BlobPrefix>")
	}
	for _, bl := range blobs {
		sb.WriteString("<Blob><Name>" + bl.name + "</Name>")
		switch bl.properties {
		case "":
			sb.WriteString("<Properties><Last-Modified>" + azModified + "</Last-Modified><Content-Length>1</Content-Length></Properties>")
		case "-":
		default:
			sb.WriteString("<Properties>" + bl.properties + "</Properties>")
		}
		sb.WriteString("</Blob>")
	}
	fmt.Fprintf(&sb, "</Blobs><NextMarker>%s</NextMarker></EnumerationResults>", marker)
	w.Header().Set("Content-Type", "application/xml")
	_, _ = fmt.Fprint(w, sb.String())
}

// TestMain gives the test binary Azurite's account before any test opens an azblob:// URL:
// walkeeper's opener, as azureblob's, reads its credentials from the environment once, at the
// first open in the process, and a test of bad URLs opens one early.
func TestMain(m *testing.M) {
	_ = os.Setenv("AZURE_STORAGE_ACCOUNT", testservers.AzuriteAccount)
	_ = os.Setenv("AZURE_STORAGE_KEY", testservers.AzuriteKey)
	os.Exit(m.Run())
}

// openHostileAzure opens container "b" the way the tests reach Azurite, on a server that
// answers every request with answer.
func openHostileAzure(t *testing.T, answer http.HandlerFunc) *objstore.Bucket {
	t.Helper()
	srv := httptest.NewServer(answer)
	t.Cleanup(srv.Close)
	return open(t, "azblob://b?protocol=http&domain="+strings.TrimPrefix(srv.URL, "http://"))
}

// A read or an existence check whose answer leaves out a header azureblob dereferences
// (Last-Modified; a HEAD's x-ms-creation-time) ended the process with a nil pointer
// dereference; the operation fails instead, and an answer with them passes.
func TestAzureAnswerWithoutDatesFails(t *testing.T) {
	var dated atomic.Bool
	b := openHostileAzure(t, func(w http.ResponseWriter, r *http.Request) {
		if dated.Load() {
			w.Header().Set("Last-Modified", azModified)
			w.Header().Set("x-ms-creation-time", azModified)
		}
		_, _ = w.Write([]byte("abc"))
	})
	ctx := context.Background()
	_, err := b.GetAtMost(ctx, "p/a", 100, nil)
	require.ErrorContains(t, err, "malformed response")
	_, err = b.Get(ctx, "p/a")
	require.ErrorContains(t, err, "malformed response")
	_, err = b.Exists(ctx, "p/a")
	require.ErrorContains(t, err, "malformed response")

	dated.Store(true)
	data, err := b.GetAtMost(ctx, "p/a", 100, nil)
	require.NoError(t, err)
	require.Equal(t, "abc", string(data))
	ok, err := b.Exists(ctx, "p/a")
	require.NoError(t, err)
	require.True(t, ok)
}

// A well-formed listing passes the checks: names and prefixes, each kind in order, across
// pages.
func TestAzureListingWellFormedPasses(t *testing.T) {
	b := openHostileAzure(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("marker") == "" {
			azListAnswer(w, []azBlob{{name: "p/a"}}, []string{"p/b/"}, "next")
			return
		}
		azListAnswer(w, []azBlob{{name: "p/c"}}, []string{"p/d/"}, "")
	})
	dirs, err := b.ListDirs(context.Background(), "p/")
	require.NoError(t, err)
	require.Equal(t, []string{"b", "d"}, dirs)
	keys, err := walkAtMost(t, b, "p/", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"p/a", "p/c"}, keys)
}

// A listing answer without a blob's dates or length, or without its <Blobs>, as a 200 whose
// body is an <Error> document is, panics in azureblob: the listing fails, the process lives on.
func TestAzureListingWithoutPropertiesFails(t *testing.T) {
	for name, answer := range map[string]http.HandlerFunc{
		"no Last-Modified": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/a", properties: "<Content-Length>1</Content-Length>"}}, nil, "")
		},
		"no Content-Length": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/a", properties: "<Last-Modified>" + azModified + "</Last-Modified>"}}, nil, "")
		},
		"no Properties": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/a", properties: "-"}}, nil, "")
		},
		"an error document": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="utf-8"?><Error><Code>InternalError</Code></Error>`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			requireKeyListingsFail(t, openHostileAzure(t, answer), "malformed listing")
		})
	}
}

// A listing must hold only names under its prefix, each after the one before: a server
// repeating a page under the same NextMarker made a walk endless, and names out of order or
// listed twice were taken as objects.
func TestAzureListingOutOfPrefixOrOrderFails(t *testing.T) {
	for name, answer := range map[string]http.HandlerFunc{
		"same page for ever": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/a"}, {name: "p/b"}}, nil, "same")
		},
		"outside the prefix": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/a"}, {name: "q/x"}}, nil, "")
		},
		"without a name": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/a"}, {name: ""}}, nil, "")
		},
		"out of order": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/c"}, {name: "p/a"}}, nil, "")
		},
		"twice": func(w http.ResponseWriter, r *http.Request) {
			azListAnswer(w, []azBlob{{name: "p/a"}, {name: "p/a"}}, nil, "")
		},
	} {
		t.Run(name, func(t *testing.T) {
			requireKeyListingsFail(t, openHostileAzure(t, answer), "malformed listing")
		})
	}
}

// A delimiter listing likewise: a server repeating a page of blob prefixes made ListDirs
// endless, its result growing all the while. The server refuses the 1,001st request, so
// that an endless listing ends the test instead of hanging it.
func TestAzureListingDirsRepeatedFails(t *testing.T) {
	requireRepeatedDirsPageFails(t, openHostileAzure, func(w http.ResponseWriter) {
		azListAnswer(w, nil, []string{"p/a/", "p/b/"}, "same")
	}, 2, "the listing ends at the repeated page")
}

// Each empty page with a fresh NextMarker deepened gocloud's iterator's recursion, about
// 128 bytes of stack a page, for as long as the server went on: until the stall timeout, or
// the runtime's 1 GB stack limit, which ends the process. The listing fails after 1,000 of them
// in a row.
func TestAzureListingEmptyPagesAreBounded(t *testing.T) {
	requireEmptyPagesBounded(t, openHostileAzure, func(w http.ResponseWriter, n int64) {
		azListAnswer(w, nil, nil, fmt.Sprint("m", n))
	})
}

// Empty pages are bounded in a row only: an entry starts the count again.
func TestAzureListingEmptyPagesBetweenEntriesPass(t *testing.T) {
	var requests atomic.Int64
	b := openHostileAzure(t, func(w http.ResponseWriter, r *http.Request) {
		switch n := requests.Add(1); {
		case n == 1000:
			azListAnswer(w, []azBlob{{name: "p/a"}}, nil, fmt.Sprint("m", n))
		case n == 2000:
			azListAnswer(w, []azBlob{{name: "p/b"}}, nil, "")
		default:
			azListAnswer(w, nil, nil, fmt.Sprint("m", n))
		}
	})
	keys, err := walkAtMost(t, b, "p/", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"p/a", "p/b"}, keys)
}

// A listing answer that does not parse is an error, not an empty listing, and so is a read
// whose body ends before its declared length, not a short object.
func TestAzureMalformedAnswersFail(t *testing.T) {
	b := openHostileAzure(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("comp") == "list" {
			_, _ = w.Write([]byte(`<EnumerationResults><Blobs><Blob>`))
			return
		}
		w.Header().Set("Last-Modified", azModified)
		w.Header().Set("Content-Length", "10")
		_, _ = w.Write([]byte("abc")) // then the server closes the connection
	})
	_, err := walkAtMost(t, b, "p/", 10)
	require.ErrorContains(t, err, "XML syntax error")
	_, err = b.GetAtMost(context.Background(), "p/a", 100, nil)
	require.Error(t, err)
}

// azcore puts an error answer's whole body into its error's text, which a log line or an
// activity failure then carried whole; the text is cut, the error still classified.
func TestAzureHugeErrorBodyIsCutFromTheError(t *testing.T) {
	ctx := context.Background()
	_, err := walkAtMost(t, openHostileAzure(t, hugeErrorBody(http.StatusForbidden)), "p/", 10)
	require.Error(t, err)
	require.Less(t, len(err.Error()), 5<<10, "the error's text")
	_, err = openHostileAzure(t, hugeErrorBody(http.StatusNotFound)).GetAtMost(ctx, "p/a", 100, nil)
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.Less(t, len(err.Error()), 5<<10, "the error's text")
}

// azcore read an Azure error answer's body whole (64 MiB took 0.8 to 1.2 GB an operation) and
// the driver decoded a list page whole (100,000 entries took about 0.5 GB); now walkeeper's
// transport reads an error answer's body up to 64 KiB, any other answer but an object's bytes
// up to 64 KiB, and a list page up to 16 MiB and the 1,000 entries it asked for, and none of
// them is asked again. A head's answer has no body (HTTP).
func TestAzureAnswersAreReadUpToALimit(t *testing.T) {
	if testing.Short() {
		t.Skip("up to 64 MiB sent per operation")
	}
	ctx := context.Background()
	t.Run("error answer of 64 MiB", func(t *testing.T) {
		var requests atomic.Int64
		b := openHostileAzure(t, hugeAnswer(&requests, http.StatusServiceUnavailable)) // which azcore retries
		ops := bucketOps(b)
		delete(ops, "exists") // a head's answer has no body
		// Read whole, the body took 0.8 to 1.2 GB; an upload allocates buffers of its own.
		requireAnswersRefusedOnce(t, ops, &requests, 16<<20)
	})
	t.Run("put or delete answered with 64 MiB", func(t *testing.T) {
		var requests atomic.Int64
		created := openHostileAzure(t, hugeAnswer(&requests, http.StatusCreated))
		accepted := openHostileAzure(t, hugeAnswer(&requests, http.StatusAccepted))
		ops := bucketOps(created)
		delete(ops, "exists")
		delete(ops, "get") // an object's bytes, which walkeeper bounds itself
		delete(ops, "list")
		ops["delete"] = bucketOps(accepted)["delete"]
		requireAnswersRefusedOnce(t, ops, &requests, 16<<20)
	})
	t.Run("list page of 100,000 entries", func(t *testing.T) {
		blobs := make([]azBlob, 100_000)
		for i := range blobs {
			blobs[i] = azBlob{name: fmt.Sprintf("p/%07d", i)}
		}
		var requests atomic.Int64
		b := openHostileAzure(t, prebuiltAzureListAnswer(&requests, blobs))
		var err error
		allocated := objstore.TotalAlloc(func() { _, err = b.List(ctx, "p/") })
		t.Logf("%d bytes allocated", allocated)
		require.Less(t, allocated, uint64(4<<20), "bytes allocated")
		require.ErrorContains(t, err, "malformed listing: more entries than the 1000 its request asked for")
		require.Equal(t, int64(1), requests.Load(), "a refused answer is not asked again")
	})
	pastLimit := make([]azBlob, 1000)
	long := strings.Repeat("x", 20<<10)
	for i := range pastLimit {
		pastLimit[i] = azBlob{name: fmt.Sprintf("p/%04d%s", i, long)}
	}
	for _, c := range []struct {
		name    string
		declare bool   // the answer says its Content-Length
		most    uint64 // bytes allocated at most
	}{
		// Refused at once, nothing of the body read.
		{"list page past 16 MiB", true, 4 << 20},
		// Read up to its limit by io.ReadAll, whose chunks and final copy take about 36 MB,
		// twice that built with the race detector, which keeps the make in their appends.
		{"list page past 16 MiB without its length", false, 96 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var requests atomic.Int64
			answer := prebuiltAzureListAnswer(&requests, pastLimit)
			b := openHostileAzure(t, func(w http.ResponseWriter, r *http.Request) {
				if !c.declare {
					w.Header().Set("Transfer-Encoding", "chunked")
				}
				answer(w, r)
			})
			var err error
			allocated := objstore.TotalAlloc(func() { _, err = b.List(ctx, "p/") })
			t.Logf("%d bytes allocated", allocated)
			require.Less(t, allocated, c.most, "bytes allocated")
			require.ErrorContains(t, err, "sent an answer longer than 16777216 bytes")
			require.Equal(t, int64(1), requests.Load(), "a refused answer is not asked again")
		})
	}
}

// prebuiltAzureListAnswer answers every request with one list page of blobs, built before, so
// that the server's own allocations stay out of what a test measures, counting the requests in
// requests.
func prebuiltAzureListAnswer(requests *atomic.Int64, blobs []azBlob) http.HandlerFunc {
	rec := httptest.NewRecorder()
	azListAnswer(rec, blobs, nil, "")
	page := rec.Body.Bytes()
	return func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Connection", "close") // the client stops reading mid-body
		w.Header().Set("Content-Type", "application/xml")
		if w.Header().Get("Transfer-Encoding") == "" {
			w.Header().Set("Content-Length", fmt.Sprint(len(page)))
		}
		_, _ = w.Write(page)
	}
}

// hugeAnswer answers every request but a head (which it gives an Azure blob's headers) with
// status and a body of 64 MiB, counting the requests in requests.
func hugeAnswer(requests *atomic.Int64, status int) http.HandlerFunc {
	chunk := []byte(strings.Repeat("x", 64<<10))
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.Header().Set("Last-Modified", azModified)
			w.Header().Set("x-ms-creation-time", azModified)
			w.Header().Set("Content-Length", "1")
			return
		}
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		// Closed after the answer: a connection the client abandoned mid-body and reused
		// would fail the next request's first attempt, which net/http sends again.
		w.Header().Set("Connection", "close")
		w.WriteHeader(status)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				return // the client stopped reading
			}
		}
	}
}
