package worker

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Handlers of /api/v1/stores/{kind}/{name}/rows: append, get, list and delete.

// List paging bounds for GET .../rows (the byte bound is --page-bytes, listRows).
const (
	defaultListLimit = 100
	maxListLimit     = 10000
)

func (a *apiServer) appendRows(w http.ResponseWriter, r *http.Request, t store.Target) error {
	// The codec checks everything about the rows (duplicate fields included), so the body
	// only needs to be JSON here; the store decodes it in AppendJSON.
	return a.withBody(w, r, false, func(body []byte) error {
		if !json.Valid(body) {
			return invalidJSON(body)
		}
		s, err := a.db.Open(r.Context(), t)
		if err != nil {
			return notFoundAs(err, CodeStoreNotFound)
		}
		// The store bounds and charges the append while it decodes, and refuses it at
		// --pending-max.
		res, err := s.AppendJSON(r.Context(), body)
		if err != nil {
			a.kickIfRefused(s, err)
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"appended": res.Rows})
		return nil
	})
}

// getRow answers one row by key. It takes one row of --max-row-bytes from the page budget, as
// a page of one row does, before it reads, and gives it back once the answer is written.
func (a *apiServer) getRow(w http.ResponseWriter, r *http.Request, s *store.Store) error {
	release, err := a.pages.take(r.Context(), a.cfg.rowsPageBytes(1))
	if err != nil {
		return err
	}
	defer release()
	row, err := s.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return notFoundAs(err, CodeRowNotFound)
	}
	writeJSON(w, http.StatusOK, row)
	return nil
}

func (a *apiServer) deleteRow(w http.ResponseWriter, r *http.Request, s *store.Store) error {
	id := r.PathValue("id") // never empty: a wildcard matches a non-empty segment
	// An append refuses such a key, so no row has it; a tombstone of it would be written for
	// nothing and answered as another key (JSON turns the bad bytes into U+FFFD).
	if !utf8.ValidString(id) {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "row id %q is not valid UTF-8", clipText(id))
	}
	if err := s.Delete(r.Context(), id); err != nil {
		a.kickIfRefused(s, err)
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": id})
	return nil
}

// GET .../rows answers a page bounded by ?limit= rows and --page-bytes bytes, read in one List
// bounded by both, so it holds at most --page-bytes of JSON plus one row; `next` is the last
// key written. The page's room is taken from --page-budget-bytes while it is answered.
func (a *apiServer) listRows(w http.ResponseWriter, r *http.Request, s *store.Store) error {
	q := r.URL.Query()
	opts := store.ListOptions{Source: cmp.Or(q.Get("source"), "all"), After: q.Get("after")}
	if !slices.Contains([]string{"all", "base", "wal"}, opts.Source) {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "source %q is not all, base or wal", clipText(opts.Source))
	}
	var err error
	if opts.Limit, err = queryLimit(q, defaultListLimit, maxListLimit); err != nil {
		return err
	}
	head := r.Method == http.MethodHead
	if head {
		opts.Limit = 1 // a HEAD answers the status of a read, not a page it would not send
	}
	release, err := a.pages.take(r.Context(), a.cfg.rowsPageBytes(opts.Limit))
	if err != nil {
		return err
	}
	defer release()
	opts.MaxBytes = a.cfg.PageBytes
	chunk, err := s.List(r.Context(), opts)
	if err != nil {
		return err
	}
	if head {
		writeJSONHeader(w, http.StatusOK)
		return nil
	}
	keyField := rowcodec.KeyField(s.Target().Kind)
	page := newPageWriter(w, "rows", false, a.cfg.PageBytes)
	for _, row := range chunk.Rows {
		key, _ := row[keyField].(string)
		ok, err := page.add(row, key)
		if err != nil {
			if !page.started {
				return err
			}
			a.log.Error("list page ended early by a row that does not encode", zap.String("target", s.Target().String()),
				zap.String("key", clipText(key)), zap.Error(err))
		}
		if !ok {
			break
		}
	}
	page.end(chunk.Next)
	return nil
}
