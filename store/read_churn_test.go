package store

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// A read whose every attempt loses the race with a merge (the merge publishes and deletes the
// generation the read's snapshot listed, and a new seal lists another) is not reading a
// damaged store: the objects it missed are no longer referenced. It tries again instead of
// answering ErrCorrupt after three attempts, which the data plane answered 500 corrupt and
// counted as a damaged object; and one that keeps losing is told to try again (ErrConflict).
func TestFindingReadLosingRacesWithMergesIsNotCorrupt(t *testing.T) {
	ctx := context.Background()
	url := "mem://" + strings.ReplaceAll(t.Name(), "/", "_")
	_, w := newGenericStore(t, url, "churn", func(o *Options) { o.CacheBytes = 1 })
	seal(t, w, row("a", 1))

	var races atomic.Int64 // merges still to run, one before each read of a generation
	var n atomic.Int64
	b := call(objstore.OpenBucket(ctx, url)).must(t)
	hook := objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op != objstore.OpGet || !strings.Contains(key, "/gen/") || races.Add(-1) < 0 {
			return nil
		}
		// A merge commits and deletes what the read listed; a seal lists a new generation.
		if _, err := w.MergeAll(ctx); err != nil {
			return err
		}
		_, err := w.Append(ctx, []Row{row("a", n.Add(1)+1)}) // in every Get's key range
		if err == nil {
			_, err = w.Flush(ctx)
		}
		return err
	}}
	m := NewMetrics(prometheus.NewRegistry(), nil)
	ro := DefaultOptions()
	ro.InstanceID, ro.CacheBytes, ro.Metrics = "reader", 1, m
	rdb := OpenDBOnBucket(b.WithFaults(hook), ro)
	t.Cleanup(func() { _ = rdb.Close(ctx) })
	r := openGeneric(t, rdb, "churn")

	races.Store(readAttempts)
	got, err := r.Get(ctx, "a")
	require.NoError(t, err, "every attempt lost a race with a merge; nothing is damaged")
	require.Equal(t, "a", got["id"])
	page := call(func() (ListPage, error) { races.Store(readAttempts); return r.List(ctx, ListOptions{}) }()).must(t)
	require.NotEmpty(t, page.Rows)
	require.Zero(t, testutil.ToFloat64(m.CorruptObjects.WithLabelValues(string(KindGeneric))), "nothing was counted damaged")

	races.Store(1 << 20) // every attempt loses
	_, err = r.Get(ctx, "a")
	require.ErrorIs(t, err, ErrConflict)
	require.NotErrorIs(t, err, ErrCorrupt)
	races.Store(0)
	require.Zero(t, testutil.ToFloat64(m.CorruptObjects.WithLabelValues(string(KindGeneric))))
}
