package worker

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// GET .../rows answers a page bounded by ?limit= rows and by --page-bytes bytes. The store
// reads it in one List bounded by both (store.ListOptions.MaxBytes), so the rows held while the
// page is written are at most --page-bytes of JSON text plus one row, whatever their sizes;
// the page ends where the next row would not fit. `next` is then the key of the last row
// written: the cursor means "after this key" however the page ended. Before it reads, the
// request takes what its page can hold from --page-budget-bytes, and gives it back once the
// answer is written or has failed, so concurrent pages are bounded together.

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
		headOnly(w)
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
