package hostile

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Rows of 500 KB whose text is half "<": a rows page stops at --page-bytes (4 MiB) of
// response, at least one row, and carries next; following next returns every row exactly
// once. "<" stays one byte in the answer (no HTML escaping), so the bound holds for the bytes
// actually sent.
func TestRowPagesAreByteBounded(t *testing.T) {
	w := startWorker(t, defaultConfig())

	const rows, pageBytes = 40, 4 * mib
	w.createGeneric(t, "huge", []field{idField, {Name: "text", Type: "string", Nullable: true}}, nil)
	text := func(i int) string { return fmt.Sprintf("%02d", i) + strings.Repeat("<<<<abcd", 62_500) }
	var rowBytes int
	for batch := 0; batch < rows/10; batch++ {
		var rs []map[string]any
		for i := batch * 10; i < batch*10+10; i++ {
			rs = append(rs, map[string]any{"id": fmt.Sprintf("row%02d", i), "text": text(i)})
		}
		rowBytes = len(jsonBody(t, rs[0]))
		w.mustOK(t, http.MethodPost, rowsPath("huge"), jsonBody(t, rs))
	}
	before := w.listing(t)

	// A page may end with the row that crosses the bound; the envelope adds a few bytes.
	limit := int(pageBytes) + rowBytes + 1024
	seen := map[string]int{}
	// More pages than rows fails: the cursor does not advance.
	w.eachPage(t, rowsPath("huge"), rows+1, func(page int, r reply) {
		var p struct {
			Rows []struct {
				ID   string `json:"id"`
				Text string `json:"text"`
			} `json:"rows"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		t.Logf("page %d: %d rows, %d bytes, next %q", page, len(p.Rows), len(r.Body), p.Next)
		if len(r.Body) > limit {
			t.Errorf("page %d is %d bytes, more than --page-bytes %d + one row (%d bytes)", page, len(r.Body), pageBytes, rowBytes)
		}
		if len(p.Rows) == 0 && p.Next != "" {
			t.Fatalf("page %d has no rows but a next cursor", page)
		}
		for _, row := range p.Rows {
			seen[row.ID]++
			var i int
			if _, err := fmt.Sscanf(row.ID, "row%02d", &i); err != nil || row.Text != text(i) {
				t.Errorf("row %q: text of %d bytes is not the one appended", row.ID, len(row.Text))
			}
		}
		if p.Next == "" && page == 1 {
			t.Errorf("one page of %d bytes held all %d rows: no next", len(r.Body), len(p.Rows))
		}
	})
	for i := 0; i < rows; i++ {
		if id := fmt.Sprintf("row%02d", i); seen[id] != 1 {
			t.Errorf("row %s returned %d times", id, seen[id])
		}
	}
	if len(seen) != rows {
		t.Errorf("%d distinct rows returned, want %d", len(seen), rows)
	}
	w.checkNothingWritten(t, before, "the reads")
}
