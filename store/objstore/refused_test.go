package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// refusals is what a WithRefusedAnswers view told, by reason.
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) tell(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[reason]++
}

func (r *refusals) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

// hugeS3Error answers with a 400 whose body is past the 64 KiB an error answer is read up to.
func hugeS3Error(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusBadRequest) // which the SDK does not retry
	_, _ = fmt.Fprint(w, "<Error><Code>InvalidRequest</Code><Message>")
	_, _ = w.Write(bytes.Repeat([]byte{'x'}, 80<<10))
	_, _ = fmt.Fprint(w, "</Message></Error>")
}

// An answer walkeeper refuses failed its operation, in the log and the activity only: a
// WithRefusedAnswers view tells each such operation once, by reason, so the process can count
// them (walkeeper_storage_answers_refused_total), and nothing else.
func TestRefusedAnswersAreToldOncePerOperation(t *testing.T) {
	ctx := context.Background()
	t.Run("malformed listing", func(t *testing.T) {
		var r refusals
		b := openHostileS3(t, func(w http.ResponseWriter, _ *http.Request) {
			listAnswer(w, []listedKey{{key: "p/a"}}, []string{"p/d/"}, true, "") // truncated, no token
		}).WithRefusedAnswers(r.tell)
		requireEveryListingFails(t, b, "malformed listing")
		require.Equal(t, map[string]int{objstore.RefusedMalformedListing: 4}, r.counts())
	})
	t.Run("too large", func(t *testing.T) {
		var r refusals
		b := openHostileS3(t, func(w http.ResponseWriter, _ *http.Request) { hugeS3Error(w) }).
			WithRefusedAnswers(r.tell)
		_, err := b.Get(ctx, "p/a")
		reason, ok := objstore.RefusedAnswer(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, objstore.RefusedTooLarge, reason)
		require.Equal(t, map[string]int{objstore.RefusedTooLarge: 1}, r.counts())
	})
	t.Run("malformed response", func(t *testing.T) {
		var r refusals
		b := openHostileGCS(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"storage#object","bucket":"b","name":"p/a","acl":[null]}`))
		}).WithRefusedAnswers(r.tell)
		require.ErrorContains(t, b.Put(ctx, "p/a", []byte("x")), "malformed response")
		require.Equal(t, map[string]int{objstore.RefusedMalformedResponse: 1}, r.counts())
	})
	t.Run("access refused", func(t *testing.T) {
		var r refusals
		b := openHostileGCS(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"code":403,"message":"no access"}}`))
		}).WithRefusedAnswers(r.tell)
		_, err := b.Exists(ctx, "p/a")
		require.ErrorContains(t, err, "storage refused access")
		require.Equal(t, map[string]int{objstore.RefusedAccess: 1}, r.counts())
	})
	t.Run("nested in a listing's callback", func(t *testing.T) {
		var r refusals
		b := openHostileS3(t, func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Query().Has("list-type") {
				listAnswer(w, []listedKey{{key: "p/a"}}, nil, false, "")
				return
			}
			hugeS3Error(w)
		}).WithRefusedAnswers(r.tell)
		err := b.Walk(ctx, "p/", func(o objstore.ObjectInfo) error {
			_, err := b.Get(ctx, o.Key)
			return err
		})
		require.ErrorContains(t, err, "longer than")
		require.Equal(t, map[string]int{objstore.RefusedTooLarge: 1}, r.counts(), "the Get's refusal, not the Walk's again")
	})
	t.Run("other failures", func(t *testing.T) {
		var r refusals
		b := openHostileS3(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprint(w, "<Error><Code>NoSuchKey</Code><Message>no</Message></Error>")
		}).WithRefusedAnswers(r.tell)
		_, err := b.Get(ctx, "p/a")
		require.ErrorIs(t, err, objstore.ErrNotFound)
		_, ok := objstore.RefusedAnswer(err)
		require.False(t, ok)
		_, err = b.Get(ctx, "p/")
		require.ErrorIs(t, err, objstore.ErrInvalidInput)
		_, ok = objstore.RefusedAnswer(nil)
		require.False(t, ok)
		require.Empty(t, r.counts())
	})
}

// Every reason is a Prometheus label value of its own.
func TestRefusedReasonsAreLabelValues(t *testing.T) {
	seen := map[string]bool{}
	for _, reason := range objstore.RefusedReasons() {
		require.False(t, seen[reason], reason)
		seen[reason] = true
		require.Equal(t, strings.ToLower(reason), reason)
	}
}
