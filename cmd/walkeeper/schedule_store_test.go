package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// rolloutStorage is a new file:// storage holding the rollout stores names.
func rolloutStorage(t *testing.T, names ...string) string {
	t.Helper()
	storage := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	db, err := store.OpenDB(t.Context(), storage, store.DefaultOptions())
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close(context.Background())) }()
	for _, n := range names {
		_, err := db.Create(t.Context(), store.Target{Kind: store.KindRollout, Name: n}, store.CreateOptions{})
		require.NoError(t, err)
	}
	return storage
}

// Outside `walkeeper dev`, `schedule ensure --target` of a mistyped store created a schedule
// whose every tick then started a merge that failed, for ever: it had no storage to check.
// Now it checks --storage or $WALKEEPER_STORAGE and refuses a missing store, or no storage at
// all, in one line with exit 2, before Temporal hears of it.
func TestScheduleEnsureTargetChecksTheStoreOutsideDev(t *testing.T) {
	tn := newTemporalNS(t)
	noDev(t)
	t.Setenv("WALKEEPER_STORAGE", "")
	storage := rolloutStorage(t, "there")
	ensure := func(args ...string) []string { return append([]string{"schedule", "ensure", "--every", "1h"}, args...) }
	const help = " (see 'walkeeper schedule ensure --help')\n"
	missing := "walkeeper: store rollout:thre does not exist; create it with: curl -XPOST http://<worker>/api/v1/stores/rollout/thre\n"
	for _, tc := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"--storage", "", []string{"--target", "rollout:thre", "--storage", storage}, missing},
		{"$WALKEEPER_STORAGE", storage, []string{"--target", "rollout:thre"}, missing},
		{"no storage", "", []string{"--target", "rollout:thre"}, "walkeeper: --target rollout:thre: pass --storage URL " +
			"(or set WALKEEPER_STORAGE, or run 'walkeeper dev') to check that the store exists" + help},
		{"--storage without --target", "", []string{"--storage", storage},
			"walkeeper: --storage: the sweep schedule names no store to check; it goes with --target" + help},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WALKEEPER_STORAGE", tc.env)
			tn.refused(t, cli.ExitUsage, tc.want, ensure(tc.args...)...)
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, id := range []string{"merge-wal-tick/rollout/thre", temporaladmin.SweepScheduleID} {
		_, err := temporaladmin.DescribeSchedule(ctx, tn.c, id)
		assert.True(t, errors.As(err, new(*serviceerror.NotFound)), "schedule %s must not exist: %v", id, err)
	}

	// A store that exists gets its schedule, from the flag or the environment.
	assert.Equal(t, "schedule merge-wal-tick/rollout/there ensured: every 1h0m0s\n", tn.ok(t, ensure("--target", "rollout:there", "--storage", storage)...))
	t.Setenv("WALKEEPER_STORAGE", storage)
	assert.True(t, strings.HasPrefix(tn.ok(t, ensure("--target", "rollout:there")...), "schedule merge-wal-tick/rollout/there ensured"))
}
