package store

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A reader whose context ends while it loads a file for the cache must not fail the other
// readers waiting on that load: they load it again with their own, live contexts.
func TestFileCacheLoadCancelledByOneCallerServesTheOthers(t *testing.T) {
	c := newFileCache(1 << 20)
	started := make(chan struct{})
	var calls atomic.Int32
	load := func(ctx context.Context) (*sortedFile, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &sortedFile{path: "p", bytes: 1}, nil
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	first := make(chan error, 1)
	go func() { _, err := c.get(ctx1, "p", load); first <- err }()
	<-started
	second := make(chan error, 1)
	go func() {
		f, err := c.get(context.Background(), "p", load)
		if err == nil && f.path != "p" {
			err = context.DeadlineExceeded
		}
		second <- err
	}()
	// Cancel only once the second reader waits on the first one's load.
	require.Eventually(t, func() bool { return loadWaiters("TestFileCacheLoadCancelledByOneCallerServesTheOthers") == 1 }, 10*time.Second, time.Millisecond)
	cancel1()
	require.ErrorIs(t, <-first, context.Canceled)
	require.NoError(t, <-second, "a live reader must not get another reader's cancellation")
	require.Equal(t, int32(2), calls.Load())
}

// loadWaiters counts the goroutines of test blocked waiting for a load another caller runs.
func loadWaiters(test string) int {
	count := 0
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if strings.Contains(g, "singleflight.(*Group).Do(") && strings.Contains(g, "sync.(*WaitGroup).Wait(") && strings.Contains(g, test) {
			count++
		}
	}
	return count
}

// The cache counts what a file holds beside its record, the Arrow metadata and a generation's
// IPC object: it held tens of times --cache-bytes of small generations (about 5.5 KB of heap
// each, counted as the 147 bytes of their record). 400 generations are enough to show it: all
// cached, they hold about four times the limit, twice the bound.
func TestFindingCacheOfSmallGenerationsStaysWithinItsLimit(t *testing.T) {
	ctx := context.Background()
	const limit = 512 << 10
	db, s := newGenericStore(t, "mem://"+t.Name(), "tiny", func(o *Options) { o.CacheBytes = limit })
	for i := 0; i < 400; i++ {
		seal(t, s, row(fmt.Sprintf("k%05d", i), int64(i)))
	}
	db.cache.clear()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	require.Len(t, call(s.List(ctx, ListOptions{Limit: 10})).must(t).Rows, 10)
	runtime.GC()
	runtime.ReadMemStats(&after)
	db.cache.mu.Lock()
	used, files := db.cache.used, len(db.cache.byKey)
	db.cache.mu.Unlock()
	require.LessOrEqual(t, used, int64(limit))
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("the cache keeps %d files, counted %d bytes, holding %d bytes of heap", files, used, held)
	require.Less(t, held, int64(2*limit), "the cache keeps %d files, counted %d bytes", files, used)
}
