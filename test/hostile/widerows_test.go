package hostile

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Wide rows: a row of 18 JSON bytes names one column of a 256-column schema, so an 8 MiB
// body is about 466,000 rows that materialise 256 slots each. Appends with more rows than
// --max-append-rows (10000), or whose decoded size alone exceeds --memtable-bytes, are 413
// append_too_large before their rows are materialised: three at once leave the worker within
// its budgets, and nothing is written.
func TestWideRowAppendsAreRefusedWithinMemory(t *testing.T) {
	cfg := defaultConfig()
	// A memtable bound below --max-body-bytes (8 MiB) lets an append of at most
	// --max-append-rows rows exceed it by its decoded size alone.
	cfg.MemtableBytes = 4 * mib
	w := startWorker(t, cfg)

	fields := []field{idField}
	for i := 1; i < 256; i++ {
		fields = append(fields, field{Name: fmt.Sprintf("c%03d", i), Type: "string", Nullable: true})
	}
	w.createGeneric(t, "wide", fields, nil)
	// The first append claims the shard (a manifest and a fence marker); the refusals below
	// must then write nothing at all.
	w.mustOK(t, http.MethodPost, rowsPath("wide"), []byte(`[{"id":"claim"}]`))
	before := w.listing(t)

	// The cheap refusal first: an unfixed worker dies of the expensive one.
	t.Run("10000 rows whose decoded size exceeds the memtable bound", func(t *testing.T) {
		rows := make([]map[string]any, 10000)
		text := strings.Repeat("x", 600)
		for i := range rows {
			rows[i] = map[string]any{"id": fmt.Sprintf("w%05d", i), "c001": text}
		}
		body := jsonBody(t, rows)
		t.Logf("body: %d bytes, %d rows, memtable bound %d bytes", len(body), len(rows), cfg.MemtableBytes)
		r, err := w.do(http.MethodPost, rowsPath("wide"), body, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		expectError(t, r, http.StatusRequestEntityTooLarge, "append_too_large", "10000 rows of 6 MB decoded")
	})

	t.Run("three concurrent 8 MiB appends of one-column rows", func(t *testing.T) {
		body := tinyRows(8*mib - 64)
		t.Logf("each body: %d bytes, %d rows", len(body), bytes.Count(body, []byte(`{"id"`)))
		replies, errs := doAll(3, func(int) (reply, error) { return w.do(http.MethodPost, rowsPath("wide"), body, nil) })
		for i := range replies {
			if errs[i] != nil {
				t.Errorf("append %d: no answer: %v", i, errs[i])
				continue
			}
			expectError(t, replies[i], http.StatusRequestEntityTooLarge, "append_too_large", fmt.Sprintf("append %d (466k rows)", i))
		}
	})

	w.checkNothingWritten(t, before, "the refused appends")
	for _, id := range []string{"r0000001", "w00001"} {
		r := w.call(t, http.MethodGet, rowsPath("wide")+"/"+id, nil, nil)
		expectError(t, r, http.StatusNotFound, "row_not_found", "a row of a refused append")
	}
}

// tinyRows is a JSON array of {"id":"r0000001"} rows, as many as fit in size bytes.
func tinyRows(size int64) []byte {
	var b bytes.Buffer
	b.Grow(int(size))
	b.WriteByte('[')
	for i := 1; ; i++ {
		row := fmt.Sprintf(`{"id":"r%07d"}`, i)
		if int64(b.Len()+len(row)+2) > size {
			break
		}
		if i > 1 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteByte(']')
	return b.Bytes()
}
