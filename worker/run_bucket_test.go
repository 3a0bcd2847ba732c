package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// Run runs the store on the bucket `walkeeper worker` opened before it dialed Temporal (to
// refuse a root it cannot make), not on a second one: the worker closes that bucket when it
// stops, which a bucket it did not use would not be; a Run refused before its worker exists
// closes it too.
func TestRunRunsTheStoreOnTheBucketItIsGiven(t *testing.T) {
	testtemporal.SkipShort(t)
	hostPort, c := testtemporal.Start(t)
	cfg := testConfig(t)
	cfg.Temporal.HostPort = hostPort
	open := func() *objstore.Bucket {
		b, err := objstore.OpenBucket(t.Context(), cfg.Storage)
		require.NoError(t, err)
		return b
	}
	closed := func(b *objstore.Bucket) bool {
		_, err := b.Exists(context.Background(), "any")
		return errors.Is(err, objstore.ErrClosed)
	}

	b := open()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var onGiven bool
	err := Run(ctx, cfg, zaptest.NewLogger(t), c, b, func(w *Worker) {
		onGiven = w.DB().Bucket().URL() == cfg.Storage && !closed(b)
		cancel()
	})
	require.NoError(t, err)
	require.True(t, onGiven, "the worker started with the given bucket open")
	require.True(t, closed(b), "the worker's store did not run on the bucket it was given")

	b = open()
	bad := cfg
	bad.Instance = ""
	require.Error(t, Run(t.Context(), bad, zaptest.NewLogger(t), c, b, nil))
	require.True(t, closed(b), "a Run refused before its worker exists left the bucket open")
}
