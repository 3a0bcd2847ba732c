package hostile

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// pendingMax is the worker's --pending-max in this test.
const pendingMax = 4

// With the own shard at --pending-max, every write path is refused with 503
// too_many_pending and Retry-After: an append to a seal-on-append store (which would seal a
// generation) and a delete alike, and the generations do not grow. Writers racing at one
// below the cap cannot overshoot it: the check and the seal are one step.
func TestPendingCapHoldsOnEveryWritePath(t *testing.T) {
	cfg := defaultConfig()
	cfg.Knobs = map[string]string{"pending-max": fmt.Sprint(pendingMax), "pending-warn": "0", "merge-after-generations": "0"}
	w := startWorker(t, cfg)
	c := w.temporalClient(t)

	fields := []field{idField, {Name: "n", Type: "int64", Nullable: true}}
	for _, name := range []string{"capped", "raced"} {
		w.createGeneric(t, name, fields, map[string]any{"seal_on_append": true})
		holdMergeID(t, c, name)
	}
	appendOne := func(store, id string) (reply, error) {
		return w.do(http.MethodPost, rowsPath(store), []byte(`[{"id":"`+id+`","n":1}]`), nil)
	}
	fill := func(t *testing.T, store string, n int) {
		for i := range n {
			if r, err := appendOne(store, fmt.Sprintf("a%d", i)); err != nil || r.Status != http.StatusOK {
				t.Fatalf("append %d below the cap: %v %s", i, err, r)
			}
		}
	}

	t.Run("append and delete at the cap", func(t *testing.T) {
		fill(t, "capped", pendingMax)
		if p := w.pendingGenerations(t, "capped"); p != pendingMax {
			t.Fatalf("%d pending generations after %d seal-on-append appends, want %d", p, pendingMax, pendingMax)
		}
		before := w.listing(t)
		for what, r := range map[string]reply{
			"append at the cap": w.call(t, http.MethodPost, rowsPath("capped"), []byte(`[{"id":"over","n":1}]`), nil),
			"delete at the cap": w.call(t, http.MethodDelete, rowsPath("capped")+"/a0", nil, nil),
		} {
			if expectError(t, r, http.StatusServiceUnavailable, "too_many_pending", what) && r.Header.Get("Retry-After") == "" {
				t.Errorf("%s: 503 without Retry-After", what)
			}
		}
		if p := w.pendingGenerations(t, "capped"); p != pendingMax {
			t.Errorf("%d pending generations after the refused writes, want %d", p, pendingMax)
		}
		w.checkNothingWritten(t, before, "the refused append and delete")
	})

	t.Run("racing writers do not overshoot", func(t *testing.T) {
		fill(t, "raced", pendingMax-1)
		const writers = 16
		replies, errs := doAll(writers, func(i int) (reply, error) { return appendOne("raced", fmt.Sprintf("race%02d", i)) })
		accepted := 0
		for i := range writers {
			switch {
			case errs[i] != nil:
				t.Errorf("writer %d: no answer: %v", i, errs[i])
			case replies[i].Status == http.StatusOK:
				accepted++
			default:
				expectError(t, replies[i], http.StatusServiceUnavailable, "too_many_pending", fmt.Sprintf("writer %d", i))
			}
		}
		p := w.pendingGenerations(t, "raced")
		t.Logf("%d of %d racing writers accepted at %d pending; now %d pending", accepted, writers, pendingMax-1, p)
		// Appends that one seal takes together are one generation, so the number accepted
		// may exceed one; the generations may not exceed the cap.
		if p > pendingMax {
			t.Errorf("%d racing writers were accepted one below the cap and the shard now has %d pending generations: the cap %d was overshot",
				accepted, p, pendingMax)
		}
	})
}

// holdMergeID occupies the store's MergeWal workflow id with a workflow that no worker runs.
// The worker starts (or attaches to) that id when it refuses a write for debt; attaching to
// this one is a no-op, so no merge lowers the debt while the test measures it.
func holdMergeID(t *testing.T, c client.Client, store string) {
	t.Helper()
	id := contract.MergeWalID(target.Target{Kind: target.KindGeneric, Name: store})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                "hostile-nobody-polls-this",
		WorkflowExecutionTimeout: 15 * time.Minute,
	}, "HostileMergePlaceholder")
	if err != nil {
		t.Fatalf("hold %s: %v", id, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.TerminateWorkflow(ctx, id, run.GetRunID(), "hostile test over")
	})
}
