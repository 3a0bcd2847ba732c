package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// The latency part: each memtable size has a store of its own whose reads hit only the
// hostileSeedRows sealed rows, so the memtable in front of them is the only difference.

const (
	hostileSeedRows = 1000
	// hostilePageRows is the List page size: the API's default.
	hostilePageRows = 100
	// hostileAppendRows is the default of --max-append-rows.
	hostileAppendRows = 10_000
)

// hostileLevel is one memtable size: Rows appended, of which Unsealed were held at the reads.
type hostileLevel struct {
	Rows      int
	Unsealed  int
	Fill      time.Duration
	Appends   []answer
	Pending   int
	RSS       int64
	Get, List durStats
	Failed    []answer
}

// runHostileLatency is the latency part: one level per memtable size.
func runHostileLatency(ctx context.Context, o Options, sz hostileSizes, dir string) ([]hostileLevel, error) {
	// The memtable bound is raised so that the largest size is really held unsealed.
	knobs := map[string]string{"flush-interval": "0", "memtable-bytes": "2GiB"}
	w, err := startHostileWorker(ctx, o, sz, fileURL(dir, true), "hostile-latency", knobs)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	var levels []hostileLevel
	rng := rand.New(rand.NewPCG(21, 1))
	for i, n := range sz.memtableRows {
		lv, err := hostileLatencyLevel(ctx, w, rng, fmt.Sprintf("lat%d", i), n)
		if err != nil {
			return nil, err
		}
		o.progressf("hostile: %d rows appended (%d unsealed when read, %d pending generations, worker RSS %.0f MiB, filled in %s: %s): Get p50 %s p99 %s (n=%d), List p50 %s p99 %s (n=%d)%s",
			lv.Rows, lv.Unsealed, lv.Pending, mib(lv.RSS), fmtDur(lv.Fill), answers(lv.Appends), fmtDur(lv.Get.P50), fmtDur(lv.Get.P99), lv.Get.N,
			fmtDur(lv.List.P50), fmtDur(lv.List.P99), lv.List.N, failedNote(lv.Failed))
		levels = append(levels, lv)
	}
	return levels, nil
}

// hostileLatencyLevel measures one memtable size: the seed rows sealed, rows appended, the reads,
// then a seal that says how many rows were still unsealed.
func hostileLatencyLevel(ctx context.Context, w *hostileWorker, rng *rand.Rand, name string, rows int) (hostileLevel, error) {
	lv := hostileLevel{Rows: rows}
	fields := []map[string]any{{"name": "id", "type": "string"}, {"name": "n", "type": "int64", "nullable": true}, {"name": "s", "type": "string", "nullable": true}}
	if err := w.client.createStore(ctx, name, fields); err != nil {
		return lv, err
	}
	path := "/api/v1/stores/generic/" + name
	if a, _ := w.client.do(ctx, http.MethodPost, path+"/rows", latencyRows("a%07d", 0, hostileSeedRows)); !a.ok() {
		return lv, fmt.Errorf("hostile latency: seed rows: %s", a)
	}
	if a, _ := w.client.do(ctx, http.MethodPost, path+"/flush", nil); !a.ok() {
		return lv, fmt.Errorf("hostile latency: seal the seed rows: %s", a)
	}
	filled, busy := 0, 0
	lv.Fill = timed(func() {
		for filled < rows && ctx.Err() == nil {
			k := min(w.knobAtMost("max-append-rows", hostileAppendRows), rows-filled)
			a, _ := w.client.do(ctx, http.MethodPost, path+"/rows", latencyRows("m%08d", filled, k))
			lv.Appends = append(lv.Appends, a)
			switch {
			case a.ok():
				filled += k
			case a.Status == http.StatusServiceUnavailable && busy < 50:
				busy++ // backpressure: the worker asks for a retry
				time.Sleep(100 * time.Millisecond)
			default:
				return // refused for good: measure what is there
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return lv, err
	}
	lv.Pending, _ = w.client.pendingGenerations(ctx, name)
	lv.RSS = w.child.rss()
	lv.Get, lv.List, lv.Failed = sampleReads(ctx, w.client, rng, w.sz, path)
	a, raw := w.client.do(ctx, http.MethodPost, path+"/flush", nil)
	var sealed struct {
		Rows int `json:"rows"`
	}
	if !a.ok() || json.Unmarshal(raw, &sealed) != nil {
		return lv, fmt.Errorf("hostile latency: seal after the reads: %s", a)
	}
	lv.Unsealed = sealed.Rows
	return lv, nil
}

// sampleReads times Gets and List pages of seed rows, up to their counts or the budget.
func sampleReads(ctx context.Context, c *hostileClient, rng *rand.Rand, sz hostileSizes, path string) (get, list durStats, failed []answer) {
	// Warm the connection and the seed generation's cache entry, untimed.
	for range 20 {
		c.do(ctx, http.MethodGet, fmt.Sprintf("%s/rows/a%07d", path, rng.IntN(hostileSeedRows)), nil)
		c.do(ctx, http.MethodGet, fmt.Sprintf("%s/rows?limit=%d", path, hostilePageRows), nil)
	}
	deadline := time.Now().Add(sz.sampleBudget)
	var gets, lists []time.Duration
	// sample times one read of path into took, or records it as failed.
	sample := func(path string, took *[]time.Duration) {
		var a answer
		d := timed(func() { a, _ = c.do(ctx, http.MethodGet, path, nil) })
		if a.ok() {
			*took = append(*took, d)
		} else {
			failed = append(failed, a)
		}
	}
	for i := 0; (i < sz.getSamples || len(lists) < sz.listPages) && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		// Interleaved, so machine drift hits both alike.
		if len(gets) < sz.getSamples {
			sample(fmt.Sprintf("%s/rows/a%07d", path, rng.IntN(hostileSeedRows)), &gets)
		}
		if len(lists) < sz.listPages && (i%max(sz.getSamples/sz.listPages, 1) == 0 || len(gets) >= sz.getSamples) {
			sample(fmt.Sprintf("%s/rows?limit=%d&after=a%07d", path, hostilePageRows, rng.IntN(hostileSeedRows-hostilePageRows)), &lists)
		}
	}
	return summarize(gets), summarize(lists), failed
}

// latencyRows is a JSON array of n rows with ids format(first…), a number and a short text.
func latencyRows(format string, first, n int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		id := fmt.Sprintf(format, first+i)
		fmt.Fprintf(&b, `{"id":%q,"n":%d,"s":"row %s of the hostile latency bench"}`, id, first+i, id)
	}
	b.WriteByte(']')
	return b.Bytes()
}

func failedNote(failed []answer) string {
	if len(failed) == 0 {
		return ""
	}
	return "; failed reads: " + answers(failed)
}
