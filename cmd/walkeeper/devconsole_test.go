package main

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store"
)

// The dev console's summary reads one page of stores, however many the storage holds, and
// says when there are more than it added up.
func TestDevConsoleStoresPartReadsOnePage(t *testing.T) {
	ctx := t.Context()
	db, err := store.OpenDB(ctx, "mem://"+t.Name(), store.DefaultOptions())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(ctx) })
	d := newDevConsole(io.Discard, nil, db, "")
	create := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := db.Create(ctx, store.Target{Kind: store.KindRollout, Name: fmt.Sprintf("r%03d", i)}, store.CreateOptions{})
			require.NoError(t, err)
		}
	}
	require.Equal(t, "stores 0, pending 0", d.storesPart(ctx))
	create(0, devSummaryMaxStores)
	require.Equal(t, fmt.Sprintf("stores %d, pending 0", devSummaryMaxStores), d.storesPart(ctx))
	create(devSummaryMaxStores, devSummaryMaxStores+1)
	require.Equal(t, fmt.Sprintf("stores %d+, pending 0 (in %d of them)", devSummaryMaxStores, devSummaryMaxStores), d.storesPart(ctx))
}
