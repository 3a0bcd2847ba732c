package hostile

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// memtableRows is how many unsealed rows the big store holds: 20 appends of 10000.
const memtableRows = 200_000

// A Get of one key costs about the same whether the memtable holds one row or 200,000
// unsealed ones. The two stores are read in turns, so load on the machine slows both alike;
// the bound (twice the small store's median plus 25 ms) is loose enough never to flake on
// a busy machine and tight enough to catch a read that scans or sorts the memtable (about
// 700 ms at this size before the fix).
func TestMemtableGetStaysFast(t *testing.T) {
	w := startWorker(t, defaultConfig()) // no flush sweeper: the rows stay unsealed

	fields := []field{idField, {Name: "n", Type: "int64", Nullable: true}}
	w.createGeneric(t, "small", fields, nil)
	w.createGeneric(t, "big", fields, nil)
	const probe = "k0100000"
	w.mustOK(t, http.MethodPost, rowsPath("small"), []byte(`[{"id":"`+probe+`","n":1}]`))
	for batch := 0; batch < memtableRows/10000; batch++ {
		rows := make([]map[string]any, 10000)
		for i := range rows {
			rows[i] = map[string]any{"id": fmt.Sprintf("k%07d", batch*10000+i)}
		}
		w.mustOK(t, http.MethodPost, rowsPath("big"), jsonBody(t, rows))
	}
	if p := w.pendingGenerations(t, "big"); p != 0 {
		t.Fatalf("the big store has %d sealed generations; the test needs its rows unsealed in the memtable", p)
	}
	before := w.listing(t)

	const warmup, samples = 2, 15
	var small, big []time.Duration
	for i := 0; i < warmup+samples; i++ {
		for _, s := range []struct {
			store string
			into  *[]time.Duration
		}{{"small", &small}, {"big", &big}} {
			start := time.Now()
			r := w.call(t, http.MethodGet, rowsPath(s.store)+"/"+probe, nil, nil)
			d := time.Since(start)
			if r.Status != http.StatusOK {
				t.Fatalf("GET %s/%s: %s", s.store, probe, r)
			}
			if i >= warmup {
				*s.into = append(*s.into, d)
			}
		}
	}
	p50small, p50big := median(small), median(big)
	bound := 2*p50small + 25*time.Millisecond
	t.Logf("GET p50: 1-row memtable %s, %d-row memtable %s (bound %s)", p50small, memtableRows, p50big, bound)
	if p50big > bound {
		t.Errorf("a Get in a memtable of %d rows takes %s (p50), more than 2 × %s + 25 ms", memtableRows, p50big, p50small)
	}
	w.checkNothingWritten(t, before, "the reads")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
