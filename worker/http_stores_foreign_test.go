package worker

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files walkeeper did not write under the registry (a desktop's .DS_Store, a README, a
// nested directory) are not stores: GET /api/v1/stores lists the stores on every page size
// and never answers 400 for them.
func TestListStoresSkipsForeignRegistryFiles(t *testing.T) {
	cfg := testConfig(t)
	_, c, _ := serveAPI(t, cfg)
	for _, name := range []string{"a", "m", "z"} {
		expect(t, c.postJSON("/api/v1/stores/generic/"+name, genericSchema), http.StatusCreated, "")
	}
	reg := filepath.Join(strings.TrimPrefix(cfg.Storage, "file://"), "_registry", "generic")
	for _, f := range []string{".DS_Store", "README.txt", "m.json.bak", filepath.Join("a", "b"), filepath.Join("a", "b.json")} {
		p := filepath.Join(reg, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not a store"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []string{"1", "2", "500"} {
		var names []string
		c.listAllStores(t, url.Values{"kind": {"generic"}, "limit": {limit}}, 3, func(_ resp, stores []any, _ string) {
			for _, s := range stores {
				names = append(names, s.(map[string]any)["name"].(string))
			}
		})
		if strings.Join(names, ",") != "a,m,z" {
			t.Fatalf("limit %s: listed %v, want a, m, z", limit, names)
		}
	}
}
