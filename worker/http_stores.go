package worker

import (
	"errors"
	"net/http"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Handlers of /api/v1/stores: create and list (stats: http_stats.go).

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

func (a *apiServer) createStore(w http.ResponseWriter, r *http.Request) error {
	t, err := a.target(r)
	if err != nil {
		return err
	}
	var req createRequest
	if err := a.decodeJSONBody(w, r, t.Kind != store.KindGeneric, &req); err != nil {
		return err
	}
	var opts store.CreateOptions
	opts.SealOnAppend = req.SealOnAppend
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

func (a *apiServer) listStores(w http.ResponseWriter, r *http.Request) error {
	kinds, after, limit, err := storesQuery(r)
	if err != nil {
		return err
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
	for i, in := range page.Stores {
		ok, err := pw.add(storeInfo{Target: in.Target.String(), StoreInfo: in}, in.Target.String())
		if err != nil && !pw.started {
			return err
		}
		if err != nil || !ok {
			_ = pw.end(page.Stores[i-1].Target.String())
			return nil
		}
	}
	_ = pw.end(page.Next.String()) // "" on the last page
	return nil
}
