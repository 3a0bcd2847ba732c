// Package duckdb_test proves the base table is readable by outside tools: it builds a store
// through the store package, merges it, then reads the Parquet runs with DuckDB
// (@duckdb/node-api, read-base.mjs) following only docs/FORMAT.md, and requires exactly the
// rows an oracle of the test's own appends, overwrites and deletes predicts, both from DuckDB
// and from the store's API (source=base). The oracle is not the store: a merge that wrote
// wrong rows would be read the same way by both readers.
//
// Node and the locked npm packages are installed on demand by scripts/install-duckdb.sh.
package duckdb_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

var allTypes = store.Schema{Fields: []store.Field{
	{Name: "id", Type: "string"},
	{Name: "s", Type: "string", Nullable: true},
	{Name: "i", Type: "int64", Nullable: true},
	{Name: "f", Type: "float64", Nullable: true},
	{Name: "b", Type: "bool", Nullable: true},
	{Name: "bin", Type: "binary", Nullable: true},
	{Name: "ts", Type: "timestamp", Nullable: true},
}}

const storeName = "duck"

// TestDuckDBReadsMergedBase: three shards write rows of all six types (with nulls, extreme
// values, overwrites across shards and generations, and deletes), several merge passes turn
// them into several base runs (so shadowed versions and tombstones are physically present),
// and DuckDB's reading of the runs listed by the latest manifest, like List(source=base), must
// equal the oracle (rowOracle: the newest write of every key, in the test's order).
// It checks again after a compaction and with generations left pending after the last merge.
func TestDuckDBReadsMergedBase(t *testing.T) {
	node := ensureDuckDB(t)
	ctx := context.Background()
	root := t.TempDir()
	storageURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(root)}).String() + "?nosync=1"
	target := store.Target{Kind: store.KindGeneric, Name: storeName}

	var stores []*store.Store
	for i := 0; i < 3; i++ {
		opts := store.DefaultOptions()
		opts.InstanceID = fmt.Sprintf("worker-%d", i)
		opts.MergeMaxGenerations = 2 // several passes, several runs
		db, err := store.OpenDB(ctx, storageURL, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close(context.Background()) })
		var s *store.Store
		if i == 0 {
			seal := false
			s, err = db.Create(ctx, target, store.CreateOptions{Schema: &allTypes, SealOnAppend: &seal})
		} else {
			s, err = db.Open(ctx, target)
		}
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}

	oracle := newRowOracle()
	appendJSON := func(s *store.Store, rows ...map[string]any) {
		t.Helper()
		body, err := json.Marshal(rows)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := s.Codec().DecodeJSON(body, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, decoded); err != nil {
			t.Fatal(err)
		}
		oracle.put(t, body)
	}
	flush := func(s *store.Store) {
		t.Helper()
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	del := func(s *store.Store, key string) {
		t.Helper()
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		oracle.delete(key)
	}
	// Generation 1 of every shard: distinct keys, every type, nulls and extremes.
	for sh, s := range stores {
		var rows []map[string]any
		for k := 0; k < 40; k++ {
			id := fmt.Sprintf("s%d-%03d", sh, k)
			r := map[string]any{"id": id, "s": fmt.Sprintf("v%d·%d ✓", sh, k), "i": k*1000 + sh,
				"f": float64(k) / 7, "b": k%2 == 0, "bin": base64.StdEncoding.EncodeToString([]byte{byte(k), 0, 255, byte(sh)}),
				"ts": time.Date(2024, 5, 1, 12, 0, k, (k*1237)*1000, time.UTC).Format(time.RFC3339Nano)}
			if k%5 == 0 { // every nullable column null
				r = map[string]any{"id": id, "s": nil, "i": nil, "f": nil, "b": nil, "bin": nil, "ts": nil}
			}
			rows = append(rows, r)
		}
		appendJSON(s, rows...)
		flush(s)
	}
	appendJSON(stores[0],
		map[string]any{"id": "extreme-max", "s": "", "i": json.Number(strconv.FormatInt(math.MaxInt64, 10)), "f": math.MaxFloat64,
			"b": false, "bin": "", "ts": "9999-12-31T23:59:59.999999Z"},
		map[string]any{"id": "extreme-min", "s": "'quote\" \\ \n\t", "i": json.Number(strconv.FormatInt(math.MinInt64, 10)),
			"f": math.SmallestNonzeroFloat64, "b": true, "bin": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0}, 100)),
			"ts": "1901-02-03T04:05:06.000007Z"},
		map[string]any{"id": "pre-epoch", "i": -1, "f": -0.1, "ts": "1969-12-31T23:59:59.999999Z"},
		map[string]any{"id": "ünïcode-🦆", "s": "🦆", "i": 0, "f": 1e-300, "b": false, "ts": "1970-01-01T00:00:00Z"},
	)
	flush(stores[0])

	// Merge some of it now: shadowed versions written later land in newer runs.
	if _, err := stores[0].MergeAll(ctx); err != nil {
		t.Fatal(err)
	}

	// Overwrites across shards (newest _seq wins, whichever shard wrote it) and within a
	// shard across generations; deletes of merged and of pending rows; a delete followed
	// by a re-insert; an overwrite that nulls every column.
	appendJSON(stores[1], map[string]any{"id": "s0-001", "s": "overwritten by shard 1", "i": 111})
	appendJSON(stores[2], map[string]any{"id": "s1-002", "s": "overwritten by shard 2", "b": true})
	flush(stores[1])
	flush(stores[2])
	appendJSON(stores[0], map[string]any{"id": "s0-001", "s": "overwritten again by shard 0", "f": 2.5})
	del(stores[0], "s0-003")
	del(stores[1], "s2-004")
	del(stores[2], "extreme-min")
	appendJSON(stores[0], map[string]any{"id": "s0-006", "s": nil, "i": nil, "f": nil, "b": nil, "bin": nil, "ts": nil})
	flush(stores[0])
	flush(stores[1])
	flush(stores[2])
	del(stores[1], "s1-007")
	flush(stores[1])
	appendJSON(stores[2], map[string]any{"id": "s1-007", "s": "back after delete", "i": 7})
	del(stores[2], "never-existed")
	flush(stores[2])
	for sh := range stores {
		appendJSON(stores[sh], map[string]any{"id": "contested", "s": fmt.Sprintf("shard %d", sh), "i": sh})
		flush(stores[sh])
	}
	for _, s := range stores {
		if _, err := s.MergeAll(ctx); err != nil {
			t.Fatal(err)
		}
	}

	paths, version := latestRuns(t, root, target)
	if len(paths) < 4 {
		t.Fatalf("want several base runs to exercise cross-run dedupe, got %d", len(paths))
	}
	t.Logf("base version %d, %d runs", version, len(paths))
	want := oracle.snapshot() // everything so far is merged
	if len(want) < 100 {
		t.Fatalf("the oracle holds only %d rows", len(want))
	}
	compareRows(t, want, apiBase(t, stores[1]), "API base after merges")
	compareRows(t, want, duckRows(t, node, paths), "DuckDB after merges")

	// Pending generations are not part of the base: both readers ignore them.
	appendJSON(stores[2], map[string]any{"id": "s0-000", "s": "pending only"}, map[string]any{"id": "pending-new"})
	del(stores[2], "s0-002")
	flush(stores[2])
	paths2, _ := latestRuns(t, root, target)
	if !equalStrings(paths, paths2) {
		t.Fatal("a seal changed the base manifest")
	}
	compareRows(t, want, apiBase(t, stores[0]), "API base with pending generations")
	compareRows(t, want, duckRows(t, node, paths2), "DuckDB with pending generations")

	// Compaction rewrites the runs (and may drop shadowed rows and tombstones): same rows.
	if _, err := stores[0].CompactBase(ctx, store.CompactParams{}); err != nil {
		t.Fatal(err)
	}
	paths3, v3 := latestRuns(t, root, target)
	if v3 <= version {
		t.Fatalf("compaction did not publish a version (%d <= %d)", v3, version)
	}
	compareRows(t, want, apiBase(t, stores[0]), "API base after compaction")
	compareRows(t, want, duckRows(t, node, paths3), "DuckDB after compaction")

	// And once everything is merged, including what was pending.
	if _, err := stores[0].MergeAll(ctx); err != nil {
		t.Fatal(err)
	}
	paths4, _ := latestRuns(t, root, target)
	final := oracle.snapshot()
	compareRows(t, final, apiBase(t, stores[1]), "API base after the final merge")
	compareRows(t, final, duckRows(t, node, paths4), "DuckDB after the final merge")
}

// rowOracle predicts the base table from the test's own writes: per key the newest row
// written (every write replaces the whole row; a column it leaves out is null), deleted keys
// gone. The test writes sequentially, so "newest" is the test's order, whichever shard wrote.
type rowOracle struct{ rows map[string]map[string]any }

func newRowOracle() *rowOracle { return &rowOracle{rows: map[string]map[string]any{}} }

// put records the rows of one acknowledged append, given as the JSON body sent, decoded the
// way duckRows decodes DuckDB's output (numbers as json.Number).
func (o *rowOracle) put(t *testing.T, body []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var rows []map[string]any
	if err := dec.Decode(&rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		full := map[string]any{}
		for _, f := range allTypes.Fields {
			full[f.Name] = r[f.Name]
		}
		o.rows[r["id"].(string)] = full
	}
}

func (o *rowOracle) delete(key string) { delete(o.rows, key) }

// snapshot copies the predicted table.
func (o *rowOracle) snapshot() map[string]map[string]any {
	out := make(map[string]map[string]any, len(o.rows))
	for k, r := range o.rows {
		out[k] = r
	}
	return out
}

// TestReadBaseScriptEdgeCases: the empty table (version 0: no manifest, no runs) and usage
// errors.
func TestReadBaseScriptEdgeCases(t *testing.T) {
	node := ensureDuckDB(t)
	out, err := exec.Command(node, "read-base.mjs", "id", "[]").Output()
	if err != nil || strings.TrimSpace(string(out)) != "[]" {
		t.Fatalf("empty path list: %q, %v", out, err)
	}
	cmd := exec.Command(node, "read-base.mjs", "id")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("missing argument: %v, want exit status 2", err)
	}
	cmd = exec.Command(node, "read-base.mjs", "id", `["/nonexistent/x.parquet"]`)
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("missing file: %v, want exit status 1", err)
	}
}

// latestRuns follows docs/FORMAT.md §2 step 1 without the store package: list
// <root>/<kind>/<name>/_versions/, read the highest <v>.json, resolve its runs' paths.
func latestRuns(t *testing.T, root string, target store.Target) ([]string, uint64) {
	t.Helper()
	dir := filepath.Join(root, string(target.Kind), target.Name, "_versions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var best uint64
	var bestName string
	for _, e := range entries {
		v, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".json"), 10, 64)
		if err != nil || !strings.HasSuffix(e.Name(), ".json") || len(e.Name()) != 20+len(".json") {
			continue // not a manifest
		}
		if v >= best {
			best, bestName = v, e.Name()
		}
	}
	if bestName == "" {
		return nil, 0 // version 0: the empty table
	}
	data, err := os.ReadFile(filepath.Join(dir, bestName))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Version uint64 `json:"version"`
		Runs    []struct {
			Path string `json:"path"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("manifest %s: %v", bestName, err)
	}
	if m.Version != best {
		t.Fatalf("manifest %s says version %d", bestName, m.Version)
	}
	var paths []string
	for _, r := range m.Runs {
		paths = append(paths, filepath.Join(root, filepath.FromSlash(r.Path)))
	}
	return paths, m.Version
}

// apiBase lists every row of source=base through the store API, keyed by id.
func apiBase(t *testing.T, s *store.Store) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	after := ""
	for {
		page, err := s.List(context.Background(), store.ListOptions{Source: store.SourceBase, Limit: 37, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rows {
			out[r["id"].(string)] = r
		}
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
}

// duckRows runs read-base.mjs over the runs (paths through stdin) and keys its rows by id.
func duckRows(t *testing.T, node string, paths []string) map[string]map[string]any {
	t.Helper()
	in, err := json.Marshal(paths)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "read-base.mjs", "id", "-")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read-base.mjs: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var rows []map[string]any
	if err := dec.Decode(&rows); err != nil {
		t.Fatalf("read-base.mjs output: %v\n%s", err, out)
	}
	res := map[string]map[string]any{}
	prev := ""
	for i, r := range rows {
		id, _ := r["id"].(string)
		if _, dup := res[id]; dup {
			t.Fatalf("DuckDB returned key %q twice", id)
		}
		if i > 0 && id <= prev {
			t.Fatalf("DuckDB rows not ordered by key: %q after %q", id, prev)
		}
		prev = id
		res[id] = r
	}
	return res
}

// compareRows compares two row sets column by column after normalising each value by its
// declared type: int64 as a decimal string, float64 by its bits, binary by its bytes,
// timestamp by its instant in microseconds.
func compareRows(t *testing.T, want, got map[string]map[string]any, what string) {
	t.Helper()
	var missing, extra, diff []string
	for id, w := range want {
		g, ok := got[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		if len(g) != len(allTypes.Fields) {
			diff = append(diff, fmt.Sprintf("%s: %d columns, want %d: %v", id, len(g), len(allTypes.Fields), g))
			continue
		}
		for _, f := range allTypes.Fields {
			wn, werr := normalise(f.Type, w[f.Name])
			gn, gerr := normalise(f.Type, g[f.Name])
			if werr != nil || gerr != nil || wn != gn {
				diff = append(diff, fmt.Sprintf("%s.%s: want %v (%v), got %v (%v)", id, f.Name, w[f.Name], werr, g[f.Name], gerr))
			}
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(diff)
	if len(missing)+len(extra)+len(diff) > 0 {
		t.Fatalf("%s: want %d rows, got %d\nmissing: %v\nunexpected: %v\ndifferent:\n  %s",
			what, len(want), len(got), missing, extra, strings.Join(diff, "\n  "))
	}
}

func normalise(typ store.FieldType, v any) (string, error) {
	if v == nil {
		return "<null>", nil
	}
	switch typ {
	case "string":
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("string column holds %T", v)
		}
		return "s:" + s, nil
	case "int64":
		switch x := v.(type) {
		case int64:
			return strconv.FormatInt(x, 10), nil
		case string: // DuckDB's BIGINT as JSON text
			n, err := strconv.ParseInt(x, 10, 64)
			return strconv.FormatInt(n, 10), err
		case json.Number:
			n, err := x.Int64()
			return strconv.FormatInt(n, 10), err
		}
	case "float64":
		var f float64
		var err error
		switch x := v.(type) {
		case float64:
			f = x
		case json.Number:
			f, err = strconv.ParseFloat(string(x), 64)
		default:
			return "", fmt.Errorf("float column holds %T", v)
		}
		return strconv.FormatUint(math.Float64bits(f), 16), err
	case "bool":
		if b, ok := v.(bool); ok {
			return strconv.FormatBool(b), nil
		}
	case "binary":
		if s, ok := v.(string); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			return "b:" + string(b), err
		}
	case "timestamp":
		if s, ok := v.(string); ok {
			tm, err := time.Parse(time.RFC3339Nano, s)
			return strconv.FormatInt(tm.UnixMicro(), 10), err
		}
	}
	return "", fmt.Errorf("%s column holds %T", typ, v)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var installOnce struct {
	sync.Once
	node string
	err  error
}

// ensureDuckDB returns the node binary, running scripts/install-duckdb.sh first when node or
// the locked @duckdb/node-api is missing. The test never relies on a manual install.
func ensureDuckDB(t *testing.T) string {
	t.Helper()
	installOnce.Do(func() {
		node, err := exec.LookPath("node")
		if err == nil && installed() {
			installOnce.node = node
			return
		}
		script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "install-duckdb.sh"))
		if err != nil {
			installOnce.err = err
			return
		}
		cmd := exec.Command("bash", script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			installOnce.err = fmt.Errorf("%s: %v\n%s", script, err, out)
			return
		}
		if !installed() {
			installOnce.err = fmt.Errorf("%s succeeded but @duckdb/node-api is still missing\n%s", script, out)
			return
		}
		installOnce.node, installOnce.err = exec.LookPath("node")
	})
	if installOnce.err != nil {
		t.Fatalf("installing DuckDB for node: %v", installOnce.err)
	}
	return installOnce.node
}

// installed reports whether node_modules holds the @duckdb/node-api version package.json pins.
func installed() bool {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
		Version      string            `json:"version"`
	}
	data, err := os.ReadFile("package.json")
	if err != nil || json.Unmarshal(data, &pkg) != nil {
		return false
	}
	want := pkg.Dependencies["@duckdb/node-api"]
	data, err = os.ReadFile(filepath.Join("node_modules", "@duckdb", "node-api", "package.json"))
	if err != nil || json.Unmarshal(data, &pkg) != nil {
		return false
	}
	return want != "" && pkg.Version == want
}
