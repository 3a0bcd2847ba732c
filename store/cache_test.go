package store

import (
	"context"
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
