package temporaladmin_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/target"
)

// A workflow of another type that someone with namespace access started under a store's merge
// or compaction ID is refused by name at every start, instead of being attached to as the
// store's run (no worker polls here, so every run stays running); a start that meets the
// store's own run still attaches to it.
func TestFindingStartRefusesAWorkflowOfAnotherTypeUnderItsID(t *testing.T) {
	testtemporal.SkipShort(t)
	_, c := testtemporal.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held, err := target.ParseTarget("generic:held")
	require.NoError(t, err)
	for _, id := range []string{contract.MergeWalID(held), contract.CompactID(held)} {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "someone-else"}, "Foo", map[string]int{"x": 1})
		require.NoError(t, err)
	}
	_, err = contract.StartMergeWal(ctx, c, held, contract.MergeWalInput{})
	require.ErrorIs(t, err, contract.ErrWorkflowIDTaken, "a MergeWal start attached to a Foo")
	require.ErrorContains(t, err, "workflow ID merge-wal/generic/held is held by a running Foo workflow")
	_, err = contract.StartCompactBase(ctx, c, held, contract.CompactBaseInput{})
	require.ErrorIs(t, err, contract.ErrWorkflowIDTaken, "a CompactBase start attached to a Foo")
	require.ErrorContains(t, err, "workflow ID compact/generic/held is held by a running Foo workflow")

	own, err := target.ParseTarget("generic:own")
	require.NoError(t, err)
	first, err := contract.StartMergeWal(ctx, c, own, contract.MergeWalInput{})
	require.NoError(t, err)
	again, err := contract.StartMergeWal(ctx, c, own, contract.MergeWalInput{})
	require.NoError(t, err, "a start meeting the store's own MergeWal attaches")
	require.Equal(t, first.GetRunID(), again.GetRunID())
}
