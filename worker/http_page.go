package worker

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// queryLimit reads ?limit= of a list route: def when it is absent, else an integer in 1..most.
func queryLimit(q url.Values, def, most int) (int, error) {
	ls := q.Get("limit")
	if ls == "" {
		return def, nil
	}
	n, err := strconv.Atoi(ls)
	if err != nil || n < 1 || n > most {
		return 0, newAPIError(http.StatusBadRequest, CodeInvalidInput, "limit %q is not an integer in 1..%d", clipText(ls), most)
	}
	return n, nil
}

// pageWriter streams one list page, {"<items>":[item,…],"next":"<cursor>"}, item by item into
// a reused buffer without HTML escaping, and stops it before it grows past --page-bytes, so a
// page is bounded in bytes whatever its rows hold.
type pageWriter struct {
	w         http.ResponseWriter
	items     string // the member holding the items: "rows" or "stores"
	omitEmpty bool   // leave "next" out on the last page instead of writing ""
	limit     int64
	started   bool          // the status and the opening are written (status 200)
	cut       bool          // an item did not fit or did not encode: the page ends at the one before
	last      string        // the cursor of the last item written
	size      int64         // bytes of the answer so far
	item      bytes.Buffer  // the JSON of the item being added
	cursor    bytes.Buffer  // the page's closing with its cursor: apart from item, which it is sized against
	enc       *json.Encoder // into item
	curEnc    *json.Encoder // into cursor
}

func newPageWriter(w http.ResponseWriter, items string, omitEmpty bool, limit int64) *pageWriter {
	p := &pageWriter{w: w, items: items, omitEmpty: omitEmpty, limit: limit}
	p.enc = json.NewEncoder(&p.item)
	p.enc.SetEscapeHTML(false)
	p.curEnc = json.NewEncoder(&p.cursor)
	p.curEnc.SetEscapeHTML(false)
	return p
}

// add writes v, whose cursor is cursor, and reports whether the page goes on. It does not once
// the answer with v and a "next" of cursor would pass the limit (the first item always fits),
// or v does not encode (the error; nothing of v is written): the page then ends at the item
// before, and v starts the next page.
func (p *pageWriter) add(v any, cursor string) (bool, error) {
	p.item.Reset()
	if err := p.enc.Encode(v); err != nil {
		p.cut = true
		return false, err
	}
	item := bytes.TrimSuffix(p.item.Bytes(), []byte{'\n'})
	if p.started && p.size+1+int64(len(item)+len(p.tail(cursor))) > p.limit {
		p.cut = true
		return false, nil
	}
	if p.started {
		p.write([]byte{','})
	} else {
		p.begin()
	}
	p.write(item)
	p.last = cursor
	return true, nil
}

// end closes the page with next ("" on the last page), or with the last item's cursor when
// the page was cut.
func (p *pageWriter) end(next string) {
	if p.cut {
		next = p.last
	}
	if !p.started {
		p.begin() // an empty page
	}
	p.write(p.tail(next))
}

// begin writes the status, the headers and the opening of the answer.
func (p *pageWriter) begin() {
	p.started = true
	writeJSONHeader(p.w, http.StatusOK)
	p.write([]byte(`{"` + p.items + `":[`))
}

// tail closes the answer with cursor as "next".
func (p *pageWriter) tail(cursor string) []byte {
	if cursor == "" && p.omitEmpty {
		return []byte("]}\n")
	}
	p.cursor.Reset()
	p.cursor.WriteString(`],"next":`)
	_ = p.curEnc.Encode(cursor) // a string always encodes, and a buffer takes every write
	b := bytes.TrimSuffix(p.cursor.Bytes(), []byte{'\n'})
	return append(b, '}', '\n')
}

// write sends b; a failed write (the client went away) shows in the request's context and
// in the status already logged, so it is not reported twice.
func (p *pageWriter) write(b []byte) {
	n, _ := p.w.Write(b)
	p.size += int64(n)
}
