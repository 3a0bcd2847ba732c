package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/walkeeper/walkeeper/worker"
)

// runHostileMemory runs each case in a fresh worker; knobs are the first worker's.
func runHostileMemory(ctx context.Context, o Options, sz hostileSizes, dir string) (knobs hostileKnobs, all []hostileCase, err error) {
	for _, c := range []struct {
		key string
		run func(ctx context.Context, w *hostileWorker) ([]hostileCase, error)
	}{
		{"wide", hostileWideRows},
		{"big", hostileBigValues},
		{"conns", hostileConnections},
	} {
		w, err := startHostileWorker(ctx, o, sz, fileURL(filepath.Join(dir, c.key), true), "hostile-"+c.key, nil)
		if err != nil {
			return knobs, nil, err
		}
		if knobs == nil {
			knobs = w.child.ready.Knobs
		}
		cases, err := c.run(ctx, w)
		w.stop()
		if err != nil {
			return knobs, nil, fmt.Errorf("hostile %s: %w\n%s", c.key, err, lastLines(w.child.stderr.String(), 20))
		}
		all = append(all, cases...)
	}
	return knobs, all, nil
}

// knobAtMost is the worker's knob name (a size or a count), at most limit.
func (w *hostileWorker) knobAtMost(name string, limit int) int {
	if n, err := worker.ParseBytes(w.child.ready.Knobs[name]); err == nil && n > 0 && n < int64(limit) {
		return int(n)
	}
	return limit
}

// hostileWideRows appends bodies as large as accepted to a wide schema: a value per null column.
func hostileWideRows(ctx context.Context, w *hostileWorker) ([]hostileCase, error) {
	fields := []map[string]any{{"name": "id", "type": "string"}}
	for i := 1; i <= w.sz.wideColumns; i++ {
		fields = append(fields, map[string]any{"name": fmt.Sprintf("c%03d", i), "type": "string", "nullable": true})
	}
	if err := w.client.createStore(ctx, "wide", fields); err != nil {
		return nil, err
	}
	size := w.knobAtMost("max-body-bytes", w.sz.wideBody)
	var bodies [][]byte
	rows := 0
	for i := 0; i < w.sz.wideAppends; i++ {
		b, n := wideRowsBody(size, rows)
		bodies = append(bodies, b)
		rows += n
	}
	req := fmt.Sprintf("%d concurrent appends of %s (%d rows each) to id + %d nullable columns", len(bodies), fmtBytes(int64(size)), rows/len(bodies), w.sz.wideColumns)
	c := w.phase(ctx, "wide_rows", "wide rows", req, func(ctx context.Context) ([]answer, string, map[string]float64) {
		as := make([]answer, len(bodies))
		var wg sync.WaitGroup
		for i, b := range bodies {
			wg.Go(func() { as[i], _ = w.client.do(ctx, http.MethodPost, "/api/v1/stores/generic/wide/rows", b) })
		}
		wg.Wait()
		return as, "", map[string]float64{"rows": float64(rows)}
	})
	return []hostileCase{c}, nil
}

// wideRowsBody is a JSON array of id-only rows of at most size bytes, and its row count.
func wideRowsBody(size, first int) ([]byte, int) {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteByte('[')
	n := 0
	for {
		row := fmt.Sprintf(`{"id":"r%07d"}`, first+n)
		if b.Len()+len(row)+2 > size {
			break
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
		n++
	}
	b.WriteByte(']')
	return b.Bytes(), n
}

// hostileBigValues appends rows of '<' (six times as large HTML-escaped), then Lists them all.
func hostileBigValues(ctx context.Context, w *hostileWorker) ([]hostileCase, error) {
	fields := []map[string]any{{"name": "id", "type": "string"}, {"name": "text", "type": "string"}}
	if err := w.client.createStore(ctx, "big", fields); err != nil {
		return nil, err
	}
	text := strings.Repeat("<", w.sz.bigValue)
	var bodies [][]byte
	for first := 0; first < w.sz.bigRows; first += w.sz.bigPerAppend {
		var rows []map[string]string
		for i := first; i < min(first+w.sz.bigPerAppend, w.sz.bigRows); i++ {
			rows = append(rows, map[string]string{"id": fmt.Sprintf("b%04d", i), "text": text})
		}
		b, _ := json.Marshal(rows)
		// json.Marshal escapes '<' as \u003c; a client may as well send it raw.
		bodies = append(bodies, bytes.ReplaceAll(b, []byte(`\u003c`), []byte("<")))
	}
	appendReq := fmt.Sprintf("%d × append of %d rows of %d kB of '<'", len(bodies), w.sz.bigPerAppend, w.sz.bigValue/1000)
	ca := w.phase(ctx, "big_append", "big values: appends", appendReq, func(ctx context.Context) ([]answer, string, map[string]float64) {
		var as []answer
		for _, b := range bodies {
			a, _ := w.client.do(ctx, http.MethodPost, "/api/v1/stores/generic/big/rows", b)
			as = append(as, a)
		}
		return as, "", map[string]float64{"rows": float64(w.sz.bigRows)}
	})
	listReq := fmt.Sprintf("List limit=%d (every row), following next", w.sz.bigRows)
	cl := w.phase(ctx, "big_list", "big values: List of all", listReq, func(ctx context.Context) ([]answer, string, map[string]float64) {
		var as []answer
		after, rows, pages, bytesRead := "", 0, 0, 0
		for pages <= w.sz.bigRows {
			path := "/api/v1/stores/generic/big/rows?limit=" + strconv.Itoa(w.sz.bigRows)
			if after != "" {
				path += "&after=" + after
			}
			a, raw := w.client.do(ctx, http.MethodGet, path, nil)
			as = append(as, a)
			if !a.ok() {
				break
			}
			var page struct {
				Rows []json.RawMessage `json:"rows"`
				Next string            `json:"next"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				as[len(as)-1].Err = "bad page: " + err.Error()
				break
			}
			pages++
			rows += len(page.Rows)
			bytesRead += len(raw)
			if page.Next == "" || len(page.Rows) == 0 {
				break
			}
			after = page.Next
		}
		return as, fmt.Sprintf("%d rows in %d pages, %s of responses", rows, pages, fmtBytes(int64(bytesRead))),
			map[string]float64{"rows": float64(rows), "pages": float64(pages), "response_mib": mib(int64(bytesRead))}
	})
	return []hostileCase{ca, cl}, nil
}
