package worker

import (
	"errors"
	"net/http"
	"slices"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Handlers of /api/v1/stores: create, list and a store's stats.

type createRequest struct {
	Fields       []store.Field `json:"fields"`
	SealOnAppend *bool         `json:"seal_on_append,omitempty"`
}

// storeInfo is one entry of GET /api/v1/stores: the registry entry plus its target string.
type storeInfo struct {
	Target string `json:"target"`
	store.StoreInfo
}

type storeResponse struct {
	Target string       `json:"target"`
	Kind   string       `json:"kind"`
	Name   string       `json:"name"`
	Schema store.Schema `json:"schema"`
}

func (a *apiServer) createStore(w http.ResponseWriter, r *http.Request, t store.Target) error {
	var req createRequest
	if err := a.decodeJSONBody(w, r, t.Kind != store.KindGeneric, &req); err != nil {
		return err
	}
	opts := store.CreateOptions{SealOnAppend: req.SealOnAppend}
	if req.Fields != nil {
		sch := store.Schema{Fields: req.Fields}
		if err := rowcodec.ValidateSchema(t.Kind, sch); err != nil {
			return err
		}
		opts.Schema = &sch
	} else if t.Kind == store.KindGeneric {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput,
			`a generic store needs a schema: {"fields":[{"name":"id","type":"string"}, ...]}`)
	}
	s, err := a.db.Create(r.Context(), t, opts)
	if err != nil {
		if errors.Is(err, store.ErrAlreadyExists) && opts.Schema != nil {
			if ex, oerr := a.db.Open(r.Context(), t); oerr == nil && !ex.Codec().Schema().Equal(*opts.Schema) {
				return newAPIError(http.StatusConflict, CodeSchemaMismatch,
					"store %s exists with another schema", t)
			}
		}
		return err
	}
	writeJSON(w, http.StatusCreated, storeResponse{Target: t.String(), Kind: string(t.Kind), Name: t.Name,
		Schema: s.Codec().Schema()})
	return nil
}

// listStores answers ?kind=&limit=&after=; after is a target "<kind>:<name>" (the next of the
// previous page), with ?kind= also a bare name.
func (a *apiServer) listStores(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	kinds := store.Kinds
	if ks := q.Get("kind"); ks != "" {
		k, err := store.ParseKind(ks)
		if err != nil {
			return unknownKind(ks)
		}
		kinds = []store.Kind{k}
	}
	limit, err := queryLimit(q, defaultStoresLimit, maxStoresLimit)
	if err != nil {
		return err
	}
	var after store.Target
	if as := q.Get("after"); as != "" {
		t, perr := store.ParseTarget(as)
		if perr != nil && len(kinds) == 1 {
			t, perr = store.Target{Kind: kinds[0], Name: as}, store.ValidateName(as)
		}
		if perr != nil {
			return newAPIError(http.StatusBadRequest, CodeInvalidInput, "after %q is not a \"<kind>:<name>\" cursor", clipText(as))
		}
		if !slices.Contains(kinds, t.Kind) {
			return newAPIError(http.StatusBadRequest, CodeInvalidInput, "after %q is not of kind %s", clipText(as), kinds[0])
		}
		after = t
	}
	head := r.Method == http.MethodHead
	if head {
		limit = 1 // a HEAD answers the status of a read, not a page it would not send
	}
	// A stores page is bounded by --page-bytes like a rows page, and shares its budget.
	release, err := a.pages.take(r.Context(), a.cfg.storesPageBytes(limit))
	if err != nil {
		return err
	}
	defer release()
	// One page of the registry: kinds in order, each in key order, after `after`, read in one
	// listing that ends with the entry reaching --page-bytes, so it holds what was reserved;
	// the answer then ends (with next) where the next entry would not fit.
	page, err := a.db.ListTargetsWith(r.Context(), store.TargetsOptions{Kinds: kinds, After: after, Limit: limit,
		MaxBytes: a.cfg.PageBytes})
	if err != nil {
		return err
	}
	if head {
		writeJSONHeader(w, http.StatusOK)
		return nil
	}
	pw := newPageWriter(w, "stores", true, a.cfg.PageBytes)
	for _, in := range page.Stores {
		ok, err := pw.add(storeInfo{Target: in.Target.String(), StoreInfo: in}, in.Target.String())
		if err != nil && !pw.started {
			return err
		}
		if !ok {
			break
		}
	}
	pw.end(page.Next.String()) // "" on the last page
	return nil
}

// GET /api/v1/stores pages the registry (docs/API.md): a response never holds more than
// `limit` stores, whatever the root holds, and `next` is the cursor of the following page.
const (
	defaultStoresLimit = 500
	maxStoresLimit     = store.MaxListPage
)

// GET .../stats answers the base table, the debt totals of every shard and one page of shards
// in shard id order (docs/API.md): a store's shards grow with its writers, and a page keeps
// the answer bounded however many there are.
const (
	defaultStatsLimit = 100
	maxStatsLimit     = store.MaxStatsShards
)

// stats answers a page of shards after ?after=, the next of the previous page (a shard id).
func (a *apiServer) stats(w http.ResponseWriter, r *http.Request, s *store.Store) error {
	q := r.URL.Query()
	limit, err := queryLimit(q, defaultStatsLimit, maxStatsLimit)
	if err != nil {
		return err
	}
	after := q.Get("after")
	if after != "" && !store.IsShardID(after) {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "after %q is not a shard id (the next of a stats page)", clipText(after))
	}
	page, err := s.StatsPage(r.Context(), after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
