package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store"
)

// A workflow of another type under a store's merge ID, started by someone with namespace
// access, is shown as what it is, not as the store's MergeWal, and is sent no status query.
func TestFindingStatusNamesAnotherWorkflowUnderTheMergeID(t *testing.T) {
	testtemporal.SkipShort(t)
	_, c := testtemporal.Start(t)
	ctx := context.Background()
	tg := store.Target{Kind: store.KindGeneric, Name: "held"}
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.MergeWalID(tg), TaskQueue: "nobody-polls"}, "Foo")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, printWorkflow(ctx, &out, stuckView{c: c}, contract.MergeWalWorkflow, contract.MergeWalID(tg)))
	require.Contains(t, out.String(), "Foo, not MergeWal: not walkeeper's run", out.String())
	require.NotContains(t, out.String(), "live status", out.String())
}
