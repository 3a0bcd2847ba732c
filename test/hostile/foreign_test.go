package hostile

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Objects walkeeper did not write (a Finder's .DS_Store, a README, a nested key under the
// registry, stray files in a store's WAL and generation folders) are skipped by every
// listing with a warning and walkeeper_foreign_objects_total: the stores list answers 200
// with the real stores only, paging past the foreign keys, and the store keeps working. A
// damaged object without a checksum (a WAL object in the pre-header form whose Arrow schema
// asks for hundreds of gigabytes) is a typed 500 corrupt, not a crash.
func TestForeignAndDamagedObjects(t *testing.T) {
	w := startWorker(t, defaultConfig())

	stores := []string{"a", "b0", "m", "zz"}
	for _, s := range stores {
		w.createGeneric(t, s, []field{idField}, nil)
	}
	w.mustOK(t, http.MethodPost, rowsPath("a"), []byte(`[{"id":"x"}]`))

	t.Run("foreign objects in listings", func(t *testing.T) {
		foreign := []string{
			".DS_Store", "README.txt",
			"_registry/.DS_Store", "_registry/README.txt",
			"_registry/generic/.DS_Store", "_registry/generic/README.txt", "_registry/generic/a/b",
			"generic/a/_mem_wal/" + w.shard + "/wal/.DS_Store",
			"generic/a/_mem_wal/" + w.shard + "/gen/README.txt",
		}
		for _, k := range foreign {
			w.writeObject(t, k, []byte("not walkeeper's\n"))
		}
		metricBefore := w.metricSum(t, "walkeeper_foreign_objects_total")
		before := w.listing(t)

		for _, q := range []string{"?kind=generic", "?kind=generic&limit=1", "?kind=generic&limit=2", "", "?limit=1"} {
			var got []string
			w.eachPage(t, "/api/v1/stores"+q, 50, func(_ int, r reply) {
				var p struct {
					Stores []struct{ Target string } `json:"stores"`
				}
				if err := json.Unmarshal(r.Body, &p); err != nil {
					t.Fatalf("GET /api/v1/stores%s: %v", q, err)
				}
				for _, s := range p.Stores {
					got = append(got, s.Target)
				}
			})
			if strings.Join(got, ",") != "generic:"+strings.Join(stores, ",generic:") {
				t.Errorf("GET /api/v1/stores%s listed %v, want exactly the generic stores %v, each once", q, got, stores)
			}
		}
		w.checkNothingWritten(t, before, "listing the stores")
		// The store whose folders hold foreign files keeps working.
		w.mustOK(t, http.MethodPost, rowsPath("a"), []byte(`[{"id":"y"}]`))
		w.mustOK(t, http.MethodPost, "/api/v1/stores/generic/a/flush", nil)
		w.mustOK(t, http.MethodGet, rowsPath("a"), nil)
		w.mustOK(t, http.MethodGet, "/api/v1/stores/generic/a/stats", nil)

		if after := w.metricSum(t, "walkeeper_foreign_objects_total"); after <= metricBefore {
			t.Errorf("walkeeper_foreign_objects_total went from %v to %v while listings met %d foreign objects", metricBefore, after, len(foreign))
		}
	})

	t.Run("damaged WAL object without a checksum", func(t *testing.T) {
		w.createGeneric(t, "walcrash", []field{idField}, nil)
		crasher := readCorpusBytes(t, filepath.Join("..", "..", "store", "testdata", "fuzz", "FuzzDecodeGeneration", "d21c188edece6bb7"))
		walDir := "generic/walcrash/_mem_wal/" + w.shard + "/wal/"
		// Position 1 in the form WAL objects had before their checksum header: plain Arrow
		// IPC, decoded unchecked by the replay of the first append's shard claim.
		w.writeObject(t, walDir+fmt.Sprintf("%020d.arrow", 1), crasher)
		before := w.listing(t)

		r, err := w.do(http.MethodPost, rowsPath("walcrash"), []byte(`[{"id":"x"}]`), nil)
		if err != nil {
			t.Fatalf("append over the damaged WAL: no answer (%v); worker alive: %v; output:\n%s", err, w.alive(), w.proc.Output())
		}
		expectError(t, r, http.StatusInternalServerError, "corrupt", "append over the damaged WAL object")
		if h := w.call(t, http.MethodGet, "/healthz", nil, nil); h.Status != http.StatusOK {
			t.Errorf("healthz after the damaged object: %s", h)
		}
		for k := range w.listing(t) {
			if _, ok := before[k]; !ok && strings.HasPrefix(k, walDir) {
				t.Errorf("the refused append wrote WAL object %s", k)
			}
		}
	})
}

// readCorpusBytes reads a one-argument Go fuzz corpus file ([]byte("...")).
func readCorpusBytes(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(raw), "\n", 3)
	if len(lines) < 2 {
		t.Fatalf("%s: not a fuzz corpus file", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(lines[1]), "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}
