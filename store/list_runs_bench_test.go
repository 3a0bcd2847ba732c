package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkListRunPage measures a List page of 100 rows over one base run of about 66 MiB
// that the cache does not keep (cache 64 MiB: it keeps files up to 16 MiB), with the default
// read budget (256 MiB). Besides time and Go allocations (-benchmem) it reports the peak
// bytes reserved from, and allocated within, the read budget, sampled every 100 µs.
func BenchmarkListRunPage(b *testing.B) {
	const rows, payload = 66 << 10, 1 << 10
	rb := NewBudget(256 << 20)
	db, _ := benchDB(b, func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 64 << 20
	})
	s := createGeneric(b, db, "listrun", false)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	letters := []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	for off := 0; off < rows; off += 4096 {
		var batch []Row
		for i := off; i < min(off+4096, rows); i++ {
			p := make([]byte, payload) // random letters: Snappy cannot shrink them
			for j := range p {
				p[j] = letters[rng.IntN(len(letters))]
			}
			batch = append(batch, keyRow(fmt.Sprintf("k%07d", i), int64(i), string(p)))
		}
		appendRows(b, s, batch...)
	}
	flush(b, s)
	call(s.MergeAll(ctx)).must(b)
	base := call(s.loadBase(ctx)).must(b)
	if len(base.Runs) != 1 || base.Runs[0].Bytes < 64<<20 {
		st, _ := s.Stats(ctx)
		b.Fatalf("want one run of at least 64 MiB, have %d runs of %d bytes in all", len(base.Runs), st.BaseBytes)
	}

	var peakReserved, peakAllocated atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				peakReserved.Store(max(peakReserved.Load(), rb.Reserved()))
				peakAllocated.Store(max(peakAllocated.Load(), rb.Allocated()))
			}
		}
	}()
	i := 0
	for b.Loop() {
		after := fmt.Sprintf("k%07d", (i*7919)%(rows-200))
		i++
		page, err := s.List(ctx, ListOptions{Limit: 100, After: after})
		if err != nil || len(page.Rows) != 100 {
			b.Fatal(err, len(page.Rows))
		}
	}
	close(stop)
	<-sampled
	b.ReportMetric(float64(base.Runs[0].Bytes)/(1<<20), "run-MiB")
	b.ReportMetric(float64(peakReserved.Load())/(1<<20), "peak-reserved-MiB")
	b.ReportMetric(float64(peakAllocated.Load())/(1<<20), "peak-allocated-MiB")
}
