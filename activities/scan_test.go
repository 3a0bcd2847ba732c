package activities

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
)

func TestScanStatsReportsDebtAndToleratesABrokenStore(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	w1 := openDB(t, url, "w1")
	w2 := openDB(t, url, "w2")
	seal(t, w1, "generic:deep", []string{"a"}, []string{"b"}, []string{"c"})
	seal(t, w2, "generic:deep", []string{"x"})
	seal(t, w1, "generic:clean")
	seal(t, w1, "generic:broken", []string{"a"})
	seal(t, w1, "rollout:other-kind")

	// Break generic:broken's descriptor; a fresh DB has no cached handle for it.
	require.NoError(t, w1.Bucket().Put(ctx, "generic/broken/store.json", []byte("{not json")))
	scanner := openDB(t, url, "scanner")
	now := time.Now().Add(time.Hour)
	env := newActivityEnv(t, &Activities{DB: scanner, Now: func() time.Time { return now }})

	res := mustRun[contract.ScanStatsResult](t, env, contract.ScanStatsActivity, contract.ScanStatsParams{Kind: "generic"})
	require.Equal(t, "generic", res.Kind)
	require.Len(t, res.Targets, 3, "every generic store, the broken one included")
	byTarget := map[string]contract.TargetStats{}
	for _, ts := range res.Targets {
		byTarget[ts.Target] = ts
	}
	broken := byTarget["generic:broken"]
	require.NotEmpty(t, broken.Error)
	require.Equal(t, contract.ErrTypeCorruptData, broken.ErrorType)

	deep := byTarget["generic:deep"]
	require.Empty(t, deep.Error)
	require.Equal(t, 4, deep.Pending)
	require.Equal(t, 3, deep.MaxShardPending)
	require.Equal(t, 2, deep.Shards)
	require.Equal(t, 2, deep.PendingShards)
	require.Greater(t, deep.OldestPendingAge, 59*time.Minute)

	clean := byTarget["generic:clean"]
	require.Zero(t, clean.Pending)
	require.Zero(t, clean.PendingShards)
	require.Zero(t, clean.OldestPendingAge)
}

// Stats are read concurrently but reported in target order, every store exactly once, with
// one broken store among them.
func TestScanStatsConcurrentKeepsTargetOrder(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	w := openDB(t, url, "w1")
	var want []string
	for i := 0; i < 13; i++ {
		name := fmt.Sprintf("generic:s%02d", i)
		gens := make([][]string, i%3)
		for j := range gens {
			gens[j] = []string{fmt.Sprintf("k%d", j)}
		}
		seal(t, w, name, gens...)
		want = append(want, name)
	}
	require.NoError(t, w.Bucket().Put(ctx, "generic/s05/store.json", []byte("{not json")))
	scanner := openDB(t, url, "scanner")
	env := newActivityEnv(t, &Activities{DB: scanner})

	res := mustRun[contract.ScanStatsResult](t, env, contract.ScanStatsActivity, contract.ScanStatsParams{Kind: "generic", Concurrency: 4})
	var got []string
	for i, ts := range res.Targets {
		got = append(got, ts.Target)
		if i == 5 {
			require.NotEmpty(t, ts.Error)
			continue
		}
		require.Empty(t, ts.Error, ts.Target)
		require.Equal(t, i%3, ts.Pending, ts.Target)
	}
	require.Equal(t, want, got)
}

func TestScanStatsResumesFromHeartbeat(t *testing.T) {
	url := memURL(t)
	db := openDB(t, url, "w1")
	seal(t, db, "generic:a", []string{"k"})
	seal(t, db, "generic:b", []string{"k"})
	env := newActivityEnv(t, &Activities{DB: db})
	// An earlier attempt got through generic:a (with made-up numbers, to see they are kept).
	env.SetHeartbeatDetails(contract.ScanProgress{LastTarget: "generic:a", Targets: []contract.TargetStats{{Target: "generic:a", Pending: 99}}})

	res := mustRun[contract.ScanStatsResult](t, env, contract.ScanStatsActivity, contract.ScanStatsParams{Kind: "generic"})
	require.Len(t, res.Targets, 2)
	require.Equal(t, contract.TargetStats{Target: "generic:a", Pending: 99}, res.Targets[0])
	require.Equal(t, "generic:b", res.Targets[1].Target)
	require.Equal(t, 1, res.Targets[1].Pending)
}
