package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// A workflow of another type under a store's merge ID, started by someone with namespace
// access, is shown as what it is, not as the store's MergeWal, and is sent no status query.
func TestFindingStatusNamesAnotherWorkflowUnderTheMergeID(t *testing.T) {
	c := newTemporalNS(t).c
	ctx := context.Background()
	tg := store.Target{Kind: store.KindGeneric, Name: "held"}
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.MergeWalID(tg), TaskQueue: "nobody-polls"}, "Foo")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, printWorkflow(ctx, &out, stuckView{c: c}, contract.MergeWalWorkflow, contract.MergeWalID(tg)))
	require.Contains(t, out.String(), "Foo, not MergeWal: not walkeeper's run", out.String())
	require.NotContains(t, out.String(), "live status", out.String())
}

// Text that anyone with namespace access can set on a run (a memo's trigger, the WalTarget
// search attribute, a workflow ID, another workflow's type under a store's ID) reaches the
// terminal clipped and with its control characters escaped: no escape sequence is sent, and
// every table keeps one line per row.
func TestFindingForeignTextIsClippedAndEscaped(t *testing.T) {
	tn := newTemporalNS(t)
	c := tn.c
	noDev(t)
	ctx := context.Background()
	tg := store.Target{Kind: store.KindGeneric, Name: "hostile"}
	hostile := strings.Repeat("A", 50_000) + "\x1b[31mred\nrow\t" + strings.Repeat("B", 50_000)
	start := func(id, typ, target string, memo map[string]any) {
		t.Helper()
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls", Memo: memo,
			TypedSearchAttributes: temporal.NewSearchAttributes(contract.WalTarget.ValueSet(target))}, typ)
		require.NoError(t, err)
	}
	start(contract.MergeWalID(tg), contract.MergeWalWorkflow, tg.String(), map[string]any{contract.MemoTrigger: hostile})
	start("merge-wal/generic/"+strings.Repeat("Z", 300), contract.MergeWalWorkflow, "generic:\x1b[31mEVIL\nrow", nil)
	start(contract.CompactID(tg), "Foo\x1b[31m\nbar", tg.String(), nil)

	var history, status string
	require.Eventually(t, func() bool {
		history, status = tn.ok(t, "history", tg.String()), tn.ok(t, "status")
		return strings.Contains(history, contract.MergeWalWorkflow) && strings.Contains(status, "Running workflows (2)")
	}, time.Minute, 100*time.Millisecond, "visibility lists the runs")
	var held bytes.Buffer
	require.NoError(t, printWorkflow(ctx, &held, stuckView{c: c}, contract.CompactBaseWorkflow, contract.CompactID(tg)))

	for what, out := range map[string]string{"history": history, "status": status, "status TARGET": held.String()} {
		require.NotContains(t, out, "\x1b", "%s sends an escape sequence", what)
		require.Less(t, len(out), 4<<10, "%s is not clipped", what)
	}
	require.Len(t, strings.Split(strings.TrimSpace(history), "\n"), 2, "a header and one row:\n%s", history)
	require.Contains(t, status, `generic:\x1b[31mEVIL\nrow`)
	require.Contains(t, held.String(), `Foo\x1b[31m\nbar, not CompactBase: not walkeeper's run`)

	// dev's console names the last merge that ended by its WalTarget, escaped too.
	require.NoError(t, c.TerminateWorkflow(ctx, "merge-wal/generic/"+strings.Repeat("Z", 300), "", "done"))
	var console string
	require.Eventually(t, func() bool {
		console, _ = (&devConsole{c: c}).mergesPart(ctx)
		return strings.Contains(console, "last merge")
	}, time.Minute, 100*time.Millisecond, "visibility lists the ended run")
	require.NotContains(t, console, "\x1b", "the dev console sends an escape sequence")
	require.Contains(t, console, `last merge generic:\x1b[31mEVIL\nrow Terminated`)
}
