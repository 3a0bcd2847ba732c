package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

func TestOptionsEnsureDefaults(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	require.NotNil(t, o.Logger)
	require.NotNil(t, o.Now)
	require.Equal(t, 8192, o.GroupCommitMaxRows)
	require.Equal(t, int64(256<<20), o.CacheBytes)
	// Zero means "off" or "no cap" for these: EnsureDefaults leaves them.
	require.Zero(t, o.MergeMaxGenerations)
	require.Zero(t, o.MergeMaxBytes)
	require.Zero(t, o.PendingWarn)
	require.Zero(t, o.PendingMax)
	require.Zero(t, o.MaxRowBytes)
	require.Zero(t, o.GroupCommitWait)
	require.Zero(t, o.ResidentStoresMax)
	require.Zero(t, o.ResidentIdle)
	require.Empty(t, o.InstanceID)

	// Set fields are kept; negative sizes are treated as unset.
	log := zap.NewExample()
	set := Options{Logger: log, GroupCommitMaxRows: 10, CacheBytes: -1}
	set.EnsureDefaults()
	require.Same(t, log, set.Logger)
	require.Equal(t, 10, set.GroupCommitMaxRows)
	require.Equal(t, int64(256<<20), set.CacheBytes)

	// DefaultOptions is EnsureDefaults plus the defaults of the zero-means-off fields, and a
	// DB opened with any options runs with the same filled-in values.
	d := DefaultOptions()
	require.Equal(t, 8192, d.GroupCommitMaxRows)
	require.Equal(t, int64(256<<20), d.CacheBytes)
	require.Equal(t, 64, d.MergeMaxGenerations)
	require.Equal(t, 4096, d.ResidentStoresMax)
	require.Equal(t, 10*time.Minute, d.ResidentIdle)
	db := call(OpenDB(context.Background(), "file://"+t.TempDir(), Options{})).must(t)
	defer db.Close(context.Background())
	require.Equal(t, 8192, db.Options().GroupCommitMaxRows)
	require.Equal(t, int64(256<<20), db.Options().CacheBytes)
	require.NotNil(t, db.Options().Now)
}
