package worker

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// GET .../rows answers a page bounded by ?limit= rows and --page-bytes bytes, read in one List
// bounded by both, so it holds at most --page-bytes of JSON plus one row; `next` is the last
// key written. The page's room is taken from --page-budget-bytes while it is answered.

func (a *apiServer) listRows(w http.ResponseWriter, r *http.Request) error {
	s, err := a.openStore(r)
	if err != nil {
		return err
	}
	opts, err := rowsQuery(r)
	if err != nil {
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
	next, last := chunk.Next, ""
	for _, row := range chunk.Rows {
		key, _ := row[keyField].(string)
		ok, err := page.add(row, key)
		if err != nil {
			if !page.started {
				return err
			}
			a.log.Error("list page ended early by a row that does not encode", zap.String("target", s.Target().String()),
				zap.String("key", clipText(key)), zap.Error(err))
			next = last
			break
		}
		if !ok {
			next = last // full: the row that did not fit starts the next page
			break
		}
		last = key
	}
	_ = page.end(next)
	return nil
}
