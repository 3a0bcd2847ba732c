package worker

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// GET .../rows answers a page bounded by ?limit= rows and by --page-bytes bytes. The store
// reads rows in key order from a cursor (store.ListOptions.After); the page is assembled here
// from chunks of such reads, sized by the rows seen so far, so the rows held in memory stay
// near what one page can carry, and it ends where the next row would not fit. `next` is then
// the key of the last row written: the cursor means "after this key" however the page ended.

func (a *apiServer) listRows(w http.ResponseWriter, r *http.Request) error {
	s, err := a.openStore(r)
	if err != nil {
		return err
	}
	opts, err := rowsQuery(r)
	if err != nil {
		return err
	}
	keyField := rowcodec.KeyField(s.Target().Kind)
	page := newPageWriter(w, "rows", false, a.cfg.PageBytes)
	left := opts.Limit
	opts.Limit = min(left, defaultListLimit)
	last := ""
	for {
		chunk, err := s.List(r.Context(), opts)
		if err != nil {
			if !page.started {
				return err
			}
			if r.Context().Err() != nil {
				return nil // the client went away; the rest of the page has no reader
			}
			// The status is sent: end the page where it got to, and the next page's read
			// answers the error.
			a.log.Warn("list page ended early by a failed read", zap.String("target", s.Target().String()),
				zap.Int("rows", page.n), zap.Error(err))
			_ = page.end(last)
			return nil
		}
		for _, row := range chunk.Rows {
			key, _ := row[keyField].(string)
			ok, err := page.add(row, key)
			if err != nil {
				if !page.started {
					return err
				}
				a.log.Error("list page ended early by a row that does not encode", zap.String("target", s.Target().String()),
					zap.String("key", clipText(key)), zap.Error(err))
				_ = page.end(last)
				return nil
			}
			if !ok {
				_ = page.end(last) // full: the row that did not fit starts the next page
				return nil
			}
			last = key
			left--
		}
		switch {
		case chunk.Next == "":
			_ = page.end("")
			return nil
		case left == 0:
			_ = page.end(last)
			return nil
		}
		opts.After, opts.Limit = last, nextChunkRows(page, a.cfg.PageBytes, left)
	}
}

// nextChunkRows is how many rows to read next for a page that has left rows to go: as many as
// the bytes left would hold at the rows' average size so far, plus one to cross the bound.
func nextChunkRows(page *pageWriter, limit int64, left int) int {
	avg := max(page.size/int64(max(page.n, 1)), 1)
	room := max(limit-page.size, 0)
	return int(min(int64(left), room/avg+1))
}
