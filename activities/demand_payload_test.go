package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// A page of MaxDemandCandidates stores whose names are near the 128-byte limit does not fit
// a payload: the scan returns the most indebted stores that fit, and the sweep, seeing a short
// page, leaves the rest to its next round, where the scan failed PayloadTooLarge and so did
// every sweep of the kind.
func TestFindingScanDemandOfLongNamesFitsItsPayload(t *testing.T) {
	url := memURL(t)
	b, err := objstore.OpenBucket(context.Background(), url)
	require.NoError(t, err)
	sealed := time.Unix(1_700_000_000, 0).UTC()
	for i := range contract.MaxDemandCandidates {
		name := fmt.Sprintf("s%04d", i) + strings.Repeat("n", 123)
		gens := 1 + i%7 // debts differ, so the order is the debt's, not the names'
		for g := 1; g <= gens; g++ {
			key := fmt.Sprintf("_demand/generic/%s/shard-%d/%020d-%d-%d", name, i%3, g, sealed.Unix(), int64(1)<<40)
			require.NoError(t, b.Put(context.Background(), key, nil))
		}
	}
	env := newActivityEnv(t, &Activities{DB: store.OpenDBOnBucket(b, store.DefaultOptions())})
	scan := func(after *contract.DemandTarget) contract.ScanDemandResult {
		return mustRun[contract.ScanDemandResult](t, env, contract.ScanDemandActivity, contract.ScanDemandParams{
			Kind: "generic", MaxCandidates: contract.MaxDemandCandidates, MergeMinGenerations: 1,
			AsOf: sealed.Add(1000 * time.Hour), After: after,
		})
	}
	res := scan(nil)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	t.Logf("%d of %d candidates in %d bytes", len(res.Targets), res.Qualified, len(raw))
	require.LessOrEqual(t, len(raw), contract.MaxPayloadBytes)
	require.Equal(t, contract.MaxDemandCandidates, res.Qualified)
	require.Greater(t, len(res.Targets), contract.MaxDemandCandidates*3/4, "the page is cut by what does not fit, not by half")
	require.Less(t, len(res.Targets), contract.MaxDemandCandidates)
	for i := 1; i < len(res.Targets); i++ {
		require.False(t, contract.DemandBefore(res.Targets[i], res.Targets[i-1]), "most indebted first")
	}
	// What was cut is what the next page starts after: no store more indebted than the last kept
	// was left out.
	next := scan(&res.Targets[len(res.Targets)-1])
	require.Equal(t, contract.MaxDemandCandidates-len(res.Targets), next.Qualified)
	require.Len(t, next.Targets, next.Qualified)
}
