package hostile

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// maxKeyBytes is the contract's store.MaxKeyBytes: a row key is at most 1024 bytes. A
// constant of the store, not a knob, so the suite spells it out rather than import it.
const maxKeyBytes = 1024

// A key longer than 1024 bytes is 400 key_too_long wherever it appears (an appended row, the
// path of a Get or a Delete, an after cursor), and nothing is written; a 1024-byte key is
// stored, read, and paged past with a cursor that fits in a URL. A key too long for the
// request line itself (400 KB, beyond the 64 KiB header limit) may instead be refused by the
// HTTP server with 431 before any handler runs: either way it is refused and writes nothing.
func TestOverlongKeysAreRefused(t *testing.T) {
	w := startWorker(t, defaultConfig())

	w.createGeneric(t, "keys", []field{idField, {Name: "n", Type: "int64", Nullable: true}}, nil)
	w.mustOK(t, http.MethodPost, rowsPath("keys"), []byte(`[{"id":"a","n":1}]`))
	before := w.listing(t)

	over := map[string]string{
		"1025-byte key": strings.Repeat("k", maxKeyBytes+1),
		"400 KB key":    strings.Repeat("k", 400*1000),
	}
	for name, key := range over {
		t.Run(name, func(t *testing.T) {
			r := w.call(t, http.MethodPost, rowsPath("keys"), jsonBody(t, []map[string]any{{"id": key, "n": 1}}), nil)
			expectError(t, r, http.StatusBadRequest, "key_too_long", "append")

			inURL := map[string]struct{ method, path string }{
				"GET path":    {http.MethodGet, rowsPath("keys") + "/" + key},
				"DELETE path": {http.MethodDelete, rowsPath("keys") + "/" + key},
				"after":       {http.MethodGet, rowsPath("keys") + "?after=" + url.QueryEscape(key)},
			}
			for what, req := range inURL {
				if len(key) > 64*1024 {
					// Refused by the 64 KiB header limit before any handler: a 431, or a reset
					// when the server closes while the client is still sending.
					r, err := w.do(req.method, req.path, nil, nil)
					if err == nil && r.Status != http.StatusRequestHeaderFieldsTooLarge {
						expectError(t, r, http.StatusBadRequest, "key_too_long", what)
					}
					continue
				}
				r := w.call(t, req.method, req.path, nil, nil)
				expectError(t, r, http.StatusBadRequest, "key_too_long", what)
			}
		})
	}
	w.checkNothingWritten(t, before, "the refused keys")

	t.Run("1024-byte key works and is paged past", func(t *testing.T) {
		long := "b" + strings.Repeat("x", maxKeyBytes-1)
		w.mustOK(t, http.MethodPost, rowsPath("keys"), jsonBody(t, []map[string]any{{"id": long, "n": 2}, {"id": "c", "n": 3}}))
		r := w.mustOK(t, http.MethodGet, rowsPath("keys")+"/"+long, nil)
		var row struct {
			ID string `json:"id"`
			N  int64  `json:"n"`
		}
		if err := json.Unmarshal(r.Body, &row); err != nil || row.ID != long || row.N != 2 {
			t.Errorf("GET of the 1024-byte key: %s", r)
		}
		var got []string
		w.eachPage(t, rowsPath("keys")+"?limit=1", 10, func(_ int, r reply) {
			var p struct {
				Rows []struct{ ID string } `json:"rows"`
			}
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatal(err)
			}
			for _, row := range p.Rows {
				got = append(got, row.ID)
			}
		})
		if want := []string{"a", long, "c"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("paging with limit=1 returned %d keys %v, want a, the 1024-byte key, c", len(got), shortKeys(got))
		}
	})
}

func shortKeys(ks []string) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = shorten(k)
	}
	return out
}
