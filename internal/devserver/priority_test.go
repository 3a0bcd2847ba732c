package devserver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
)

// TestTunedServerHonoursSweepPriority: on a server with walkeeper's tuning, a workflow
// started at contract.SweepPriority behind a backlog of default-priority ones is served
// long before the backlog drains, as the sweep must be behind the merges it starts
// (docs/OPERATIONS.md §11, "Task priority for the sweep"). With the 1.29 matcher's default
// it ran last.
func TestTunedServerHonoursSweepPriority(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{Install: true, Headless: true, Progress: t.Output()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.HostPort(), Logger: devserver.DiscardLogger})
	require.NoError(t, err)
	defer c.Close()

	var mu sync.Mutex
	var order []string
	noop := func(ctx workflow.Context, name string) error {
		if !workflow.IsReplaying(ctx) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		}
		return nil
	}
	const backlog = 300
	queue := "priority-test"
	for i := range backlog {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "Noop", fmt.Sprintf("low-%d", i))
		require.NoError(t, err)
	}
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue, Priority: contract.SweepPriority}, "Noop", "sweep")
	require.NoError(t, err)

	w := worker.New(c, queue, worker.Options{MaxConcurrentWorkflowTaskExecutionSize: 2, MaxConcurrentWorkflowTaskPollers: 2})
	w.RegisterWorkflowWithOptions(noop, workflow.RegisterOptions{Name: "Noop"})
	require.NoError(t, w.Start())
	defer w.Stop()
	pos := func() int {
		mu.Lock()
		defer mu.Unlock()
		for i, n := range order {
			if n == "sweep" {
				return i + 1
			}
		}
		return 0
	}
	require.Eventually(t, func() bool { return pos() > 0 }, 2*time.Minute, 50*time.Millisecond)
	t.Logf("the priority-1 workflow ran as number %d behind %d queued", pos(), backlog)
	require.Less(t, pos(), backlog/3, "served ahead of the backlog")
}
