package main

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// runningOf names a page of stores in visibility queries of runningOfChunk stores each, and
// finds the running runs of stores in every chunk (a real server's visibility parses each
// query).
func TestRunningOfFindsRunsInEveryChunk(t *testing.T) {
	c := newTemporalNS(t).c
	ctx := context.Background()
	stores := make([]store.StoreInfo, 2*runningOfChunk+50)
	for i := range stores {
		tg := store.Target{Kind: store.KindGeneric, Name: fmt.Sprintf("s%04d", i)}
		stores[i] = store.StoreInfo{Target: tg, Kind: tg.Kind, Name: tg.Name}
	}
	// Runs on a queue no worker polls stay running.
	start := func(id, typ string) {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls"}, typ)
		require.NoError(t, err)
	}
	first, middle, last := stores[0].Target, stores[runningOfChunk+10].Target, stores[len(stores)-1].Target
	start(contract.MergeWalID(first), contract.MergeWalWorkflow)
	start(contract.MergeWalID(middle), contract.MergeWalWorkflow)
	start(contract.CompactID(middle), contract.CompactBaseWorkflow)
	start(contract.CompactID(last), contract.CompactBaseWorkflow)
	want := map[string][]string{
		first.String():  {contract.MergeWalWorkflow},
		middle.String(): {contract.CompactBaseWorkflow, contract.MergeWalWorkflow},
		last.String():   {contract.CompactBaseWorkflow},
	}
	var got map[string][]string
	require.Eventually(t, func() bool {
		var err error
		got, err = runningOf(ctx, c, stores)
		require.NoError(t, err)
		return reflect.DeepEqual(got, want) // visibility may list the four runs in any order
	}, time.Minute, 100*time.Millisecond, "visibility lists the four runs")
	require.Equal(t, want, got)
}
