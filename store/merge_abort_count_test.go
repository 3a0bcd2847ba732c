package store

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// abortReports is what a MergeWal run counts reclaimed for a pass its Abort found committed:
// the pass's generations unless another attempt's run holds them.
func abortReports(ar AbortResult, p *PreparedMerge) int {
	if !ar.CommitPresent || ar.CommittedByAnother {
		return 0
	}
	return len(p.Generations)
}

// Two attempts race on one pass; the loser's commit fails outright and its Abort finds the
// range committed by the winner's run, while the winner's commit reply is lost and its Abort
// finds its own run: between them they report the pass once.
func TestFindingAbortOfARacingLoserReportsThePassOnce(t *testing.T) {
	ctx := context.Background()
	db, s, winner, loser := twoPrepares(t, "abortonce")

	require.NoError(t, errOf(commitOne(ctx, s, winner))) // published; its reply is lost
	healthy := db.bucket
	db.bucket = db.bucket.WithFaults(failOn(errors.New("storage unreachable"), func(string, string) bool { return true }))
	require.Error(t, errOf(commitOne(ctx, s, loser)), "the loser's commit fails outright")
	db.bucket = healthy

	lost := call(s.Abort(ctx, loser)).must(t)
	require.True(t, lost.CommitPresent)
	require.True(t, lost.CommittedByAnother, "the winner's run holds the pass")
	won := call(s.Abort(ctx, winner)).must(t)
	require.True(t, won.CommitPresent)
	require.False(t, won.CommittedByAnother, "the retry of the lost reply finds its own run")

	require.Equal(t, 4, abortReports(lost, loser)+abortReports(won, winner), "the pass is reported once")
	require.Equal(t, 4, len(allRows(t, s, SourceBase)))
}
