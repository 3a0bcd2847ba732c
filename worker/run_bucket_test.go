package worker_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/worker"
)

// runConfig is the configuration of a Run of instance on a fresh file:// root and the Temporal
// server at hostPort, with no schedule, stuck scan or fairness probe to wait on.
func runConfig(t *testing.T, instance, hostPort string) worker.Config {
	t.Helper()
	cfg := worker.DefaultConfig()
	cfg.Instance = instance
	cfg.Storage = "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	cfg.Listen = "127.0.0.1:0"
	cfg.Temporal.HostPort = hostPort
	cfg.SweepInterval, cfg.ReconcileInterval, cfg.StuckScanInterval = 0, 0, 0
	cfg.FairnessProbe = false
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// `walkeeper worker` opened its storage before it dialed Temporal, to refuse a root it cannot
// make, closed it, and Start opened it a second time. Now Run takes the bucket the command
// opened and the store runs on it: the worker closes that bucket when it stops, which a
// bucket it did not use would not be; and a Run that fails before its worker exists closes
// it too.
func TestRunRunsTheStoreOnTheBucketItIsGiven(t *testing.T) {
	testtemporal.SkipShort(t)
	hostPort, c := testtemporal.Start(t)
	cfg := runConfig(t, "given-bucket", hostPort)
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
	err := worker.Run(ctx, cfg, zaptest.NewLogger(t), c, b, func(w *worker.Worker) {
		onGiven = w.DB().Bucket().URL() == cfg.Storage && !closed(b)
		cancel()
	})
	require.NoError(t, err)
	require.True(t, onGiven, "the worker started with the given bucket open")
	require.True(t, closed(b), "the worker's store did not run on the bucket it was given")

	b = open()
	bad := cfg
	bad.Instance = ""
	require.Error(t, worker.Run(t.Context(), bad, zaptest.NewLogger(t), c, b, nil))
	require.True(t, closed(b), "a Run refused before its worker exists left the bucket open")
}
