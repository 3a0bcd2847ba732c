package temporaladmin_test

import (
	"context"
	"path"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/target"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// A workflow of another type that someone with namespace access started under a store's merge
// or compaction ID is refused by name at every start, instead of being attached to as the
// store's run (no worker polls here, so every run stays running); a start that meets the
// store's own run still attaches to it. A start that begins a run costs one
// StartWorkflowExecution and nothing more: only a start that met a running workflow describes it.
func TestFindingStartRefusesAWorkflowOfAnotherTypeUnderItsID(t *testing.T) {
	testtemporal.SkipShort(t)
	hostPort, _ := testtemporal.Start(t)
	calls := map[string]*atomic.Int64{"StartWorkflowExecution": {}, "DescribeWorkflowExecution": {}}
	opts, err := temporaladmin.Config{HostPort: hostPort}.ClientOptions(nil)
	require.NoError(t, err)
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
			if n, ok := calls[path.Base(method)]; ok {
				n.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, o...)
		}))
	c, err := client.Dial(opts)
	require.NoError(t, err)
	defer c.Close()
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
	starts, describes := calls["StartWorkflowExecution"].Load(), calls["DescribeWorkflowExecution"].Load()
	first, err := contract.StartMergeWal(ctx, c, own, contract.MergeWalInput{})
	require.NoError(t, err)
	require.Equal(t, starts+1, calls["StartWorkflowExecution"].Load())
	require.Equal(t, describes, calls["DescribeWorkflowExecution"].Load(), "a fresh start describes nothing")
	again, err := contract.StartMergeWal(ctx, c, own, contract.MergeWalInput{})
	require.NoError(t, err, "a start meeting the store's own MergeWal attaches")
	require.Equal(t, first.GetRunID(), again.GetRunID())
	require.Equal(t, describes+1, calls["DescribeWorkflowExecution"].Load(), "an attach describes the run it met, once")
}
