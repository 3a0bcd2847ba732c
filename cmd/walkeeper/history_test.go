package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/walkeeper/walkeeper/internal/cli"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// TestHistoryAgainstTemporal runs real merges and a compaction through a real worker on a
// real dev server, then reads them back with `walkeeper history` (table and JSON, paged by
// --limit); a MergeWal started for a missing store without the CLI's pre-check fails, and its
// error is printed as one line, unwrapped to its cause. Every `walkeeper queries` query is
// accepted by the server's visibility.
func TestHistoryAgainstTemporal(t *testing.T) {
	tn := newTemporalNS(t)
	tc := tn.c
	noDev(t)
	storage := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	cfg := worker.DefaultConfig()
	cfg.Instance = "history"
	cfg.Temporal.Namespace = tn.ns
	cfg.Storage = storage
	cfg.Listen = "127.0.0.1:0"
	cfg.FlushInterval = time.Hour // seals only by the flush calls below
	cfg.SweepInterval = 0
	cfg.FairnessProbe = false // 80 workflow starts that are not the subject
	w, err := worker.New(cfg, zaptest.NewLogger(t), tc)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, w.Stop(ctx))
	})
	base := "http://" + w.HTTPAddr()
	post := func(path, body string) {
		t.Helper()
		res, err := http.Post(base+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		res.Body.Close()
		require.Less(t, res.StatusCode, 300, "POST %s: %s", path, res.Status)
	}
	post("/api/v1/stores/generic/h", `{"fields":[{"name":"id","type":"string"}]}`)
	for i := range 3 {
		post("/api/v1/stores/generic/h/rows", fmt.Sprintf(`[{"id":"r%d"}]`, i))
		post("/api/v1/stores/generic/h/flush", "")
	}

	runCLI := func(args ...string) (int, string, string) {
		t.Helper()
		return tn.run(t, args...)
	}
	tn.ok(t, "merge", "generic:h", "--wait", "--storage", storage)
	tn.ok(t, "compact", "generic:h", "--wait", "--storage", storage)

	// No storage known: no pre-check, so the workflow itself meets the missing store. Its
	// failure chain is printed as one line: our context, then the innermost cause.
	code, _, errOut := runCLI("merge", "generic:nope", "--wait", "--timeout", "90s")
	assert.Equal(t, cli.ExitFailure, code, errOut)
	line := firstLine(errOut)
	t.Logf("merge of a missing store, no pre-check: %s", line)
	assert.True(t, strings.HasPrefix(line, "walkeeper: MergeWal generic:nope (workflow merge-wal/generic/nope, run "), line)
	assert.NotContains(t, line, "(type:")
	assert.NotContains(t, line, "retryable")
	assert.NotContains(t, line, "workflow execution error")
	_, cause, _ := strings.Cut(line, "): ")
	assert.Contains(t, cause, "generic:nope", "the cause names the store")

	const ui = "http://ui.test:8233/"
	var runs []historyRun
	require.Eventually(t, func() bool {
		code, out, _ := runCLI("history", "generic:h", "--json", "--ui", ui)
		runs = nil
		return code == cli.ExitOK && json.Unmarshal([]byte(out), &runs) == nil && len(runs) == 2 &&
			runs[0].Close != nil && runs[1].Close != nil
	}, 30*time.Second, 250*time.Millisecond, "history of generic:h: %+v", runs)
	types := map[string]historyRun{}
	for _, r := range runs {
		types[r.Workflow] = r
		assert.Equal(t, "Completed", r.Result)
		require.NotNil(t, r.DurationSec)
		require.NotNil(t, r.Close)
		// The duration is the run's close minus its start, both from the server; a run with
		// activities takes more than nothing (">= 0" passed a constant 0).
		assert.Greater(t, *r.DurationSec, 0.0, "%s duration", r.Workflow)
		assert.InDelta(t, r.Close.Sub(r.Start).Seconds(), *r.DurationSec, 1e-6, "%s duration vs close - start", r.Workflow)
		assert.Equal(t, fmt.Sprintf("http://ui.test:8233/namespaces/%s/workflows/%s/%s/history",
			tn.ns, strings.ReplaceAll(r.WorkflowID, "/", "%2F"), r.RunID), r.URL)
	}
	require.Contains(t, types, "MergeWal")
	require.Contains(t, types, "CompactBase")
	assert.Equal(t, "merge-wal/generic/h", types["MergeWal"].WorkflowID)
	assert.Equal(t, "compact/generic/h", types["CompactBase"].WorkflowID)
	// The merge's own count of its actions (the memo) is what its history bills.
	events, err := actioncount.History(t.Context(), tc, types["MergeWal"].WorkflowID, types["MergeWal"].RunID)
	require.NoError(t, err)
	mergeActions := actioncount.Events(events)
	require.NotNil(t, types["MergeWal"].Actions, "the MergeWal memo carries its action count")
	assert.EqualValues(t, mergeActions.Actions, *types["MergeWal"].Actions)
	assert.Nil(t, types["CompactBase"].Actions, "CompactBase does not count its actions")

	out := tn.ok(t, "history", "generic:h", "--ui", ui)
	t.Logf("walkeeper history generic:h:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^WHEN\s+WORKFLOW\s+TRIGGER\s+PENDING AT START\s+RECLAIMED\s+ACTIONS\s+BYTES\s+DURATION\s+RESULT\s+WEB UI$`, lines[0])
	for _, l := range lines[1:] {
		assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+(MergeWal|CompactBase)\s+\S+\s+\S+\s+\S+\s+\S+\s+.+\s+Completed\s+http://ui\.test:8233/namespaces/`+tn.ns+`/workflows/`, l)
	}
	assert.Contains(t, lines[1]+lines[2], fmt.Sprintf(" %d ", mergeActions.Actions), "the MergeWal row shows its action count")

	// --limit reads no more than asked and says so.
	out = tn.ok(t, "history", "generic:h", "--limit", "1")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Equal(t, "(the newest 1 runs; --limit N for more)", lines[2])

	require.Eventually(t, func() bool {
		code, out, _ := runCLI("history", "generic:nope")
		return code == cli.ExitOK && strings.Contains(out, "MergeWal") && strings.Contains(out, "Failed")
	}, 30*time.Second, 250*time.Millisecond)
	assert.Equal(t, "No MergeWal or CompactBase runs of generic:none on record in namespace "+tn.ns+".\n", tn.ok(t, "history", "generic:none"))

	// dev's console summary over the same server and storage.
	sdb, err := openStorage(t.Context(), storage, "walkeeper-dev-console", zaptest.NewLogger(t), store.DefaultOptions())
	require.NoError(t, err)
	defer func() { _ = sdb.Close(context.Background()) }()
	summary, key := newDevConsole(nil, tc, sdb, "http://ui.test:8233").summary(t.Context())
	t.Logf("dev console: %s", summary)
	assert.Regexp(t, `^\d\d:\d\d:\d\d \| stores 1, pending 0 \| merges done 1, running 0 \| last merge generic:(h Completed|nope Failed) \d+s ago \| UI http://ui.test:8233$`, summary)
	// Without a terminal the console prints a line only when its key changes: not the clock.
	assert.Regexp(t, `^stores 1, pending 0 \| merges done 1, running 0 \| last merge generic:(h Completed|nope Failed) \| UI http://ui.test:8233$`, key)

	// The saved views' queries use the workflow side's attributes (contract/observe.go);
	// register the ones this server lacks, as a worker does, and have visibility parse each.
	ctx := t.Context()
	_, err = tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: tn.ns,
		SearchAttributes: map[string]enumspb.IndexedValueType{
			contract.WalTriggerName:        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
			contract.WalPendingAtStartName: enumspb.INDEXED_VALUE_TYPE_INT,
			contract.WalSweepStartsName:    enumspb.INDEXED_VALUE_TYPE_DOUBLE,
		},
	})
	if err != nil && !strings.Contains(err.Error(), "already") {
		require.NoError(t, err)
	}
	h := store.Target{Kind: store.KindGeneric, Name: "h"}
	for _, v := range append(savedViews(nil, time.Minute, 100), savedViews(&h, 30*time.Second, 5)...) {
		require.Eventually(t, func() bool {
			_, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: tn.ns, Query: v.query})
			if err != nil {
				t.Logf("%s: %v", v.query, err)
			}
			return err == nil
		}, 20*time.Second, 500*time.Millisecond, "query of %q", v.name)
	}
	resp, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: tn.ns,
		Query: savedViews(&h, time.Minute, 100)[0].query})
	require.NoError(t, err)
	assert.EqualValues(t, 2, resp.GetCount(), "merges and compactions of generic:h")
}
