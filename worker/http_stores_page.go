package worker

import (
	"net/http"
	"slices"

	"github.com/walkeeper/walkeeper/store"
)

// GET /api/v1/stores pages the registry (docs/API.md): a response never holds more than
// `limit` stores, whatever the root holds, and `next` is the cursor of the following page.

const (
	defaultStoresLimit = 500
	maxStoresLimit     = store.MaxListPage
)

// storesQuery parses ?kind=&limit=&after=. after is a target "<kind>:<name>" (the next of
// the previous page); with ?kind= it may also be a bare name.
func storesQuery(r *http.Request) (kinds []store.Kind, after store.Target, limit int, err error) {
	q := r.URL.Query()
	kinds = store.Kinds
	if ks := q.Get("kind"); ks != "" {
		k, perr := store.ParseKind(ks)
		if perr != nil {
			return nil, after, 0, unknownKind(ks)
		}
		kinds = []store.Kind{k}
	}
	if limit, err = queryLimit(q, defaultStoresLimit, maxStoresLimit); err != nil {
		return nil, after, 0, err
	}
	if as := q.Get("after"); as != "" {
		t, perr := store.ParseTarget(as)
		if perr != nil && len(kinds) == 1 {
			t, perr = store.Target{Kind: kinds[0], Name: as}, store.ValidateName(as)
		}
		if perr != nil {
			return nil, after, 0, newAPIError(http.StatusBadRequest, CodeInvalidInput, "after %q is not a \"<kind>:<name>\" cursor", clipText(as))
		}
		if !slices.Contains(kinds, t.Kind) {
			return nil, after, 0, newAPIError(http.StatusBadRequest, CodeInvalidInput, "after %q is not of kind %s", clipText(as), kinds[0])
		}
		after = t
	}
	return kinds, after, limit, nil
}
