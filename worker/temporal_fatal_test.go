package worker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

// A Temporal worker that stops on an error the SDK does not retry (polls refused with
// NamespaceNotFound or InvalidArgument for two minutes) ends Run with that error, so the
// process exits and its supervisor restarts it, instead of running on with its data plane up
// and nothing polling its queues, never to merge again however healthy it looks.
func TestRunEndsWhenATemporalWorkerStopsForGood(t *testing.T) {
	testtemporal.SkipShort(t)
	hostPort, _ := testtemporal.Start(t)
	var refuse atomic.Bool
	refusePolls := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if refuse.Load() && strings.Contains(method, "/Poll") {
			return serviceerror.ToStatus(serviceerror.NewNamespaceNotFound("default")).Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: "default",
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(refusePolls)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	cfg := testConfig(t)
	cfg.Temporal.HostPort = hostPort
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, cfg, zaptest.NewLogger(t), c, nil, func(*Worker) { refuse.Store(true) })
	}()
	// The SDK retries such refusals for 2 minutes before it stops a worker.
	select {
	case err := <-ran:
		if err == nil || !strings.Contains(err.Error(), "Temporal worker stopped") {
			t.Fatalf("Run returned %v, want the Temporal worker's fatal error", err)
		}
	case <-time.After(4 * time.Minute):
		cancel()
		<-ran
		t.Fatal("Run went on after its Temporal workers stopped for good")
	}
}
