package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

// An --instance of any length is a working one: the Temporal workers' identity names it, and
// Temporal refuses every poll whose identity passes its ID length limit (1,000 bytes by
// default) as InvalidArgument, so a long instance once started a worker whose data plane
// served while nothing polled its queues, until the SDK gave up and the process exited.
func TestFindingALongInstanceStillPollsTemporal(t *testing.T) {
	testtemporal.SkipShort(t)
	hostPort, _ := testtemporal.Start(t)
	var (
		mu      sync.Mutex
		polls   int
		refused error
	)
	watchPolls := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !strings.Contains(method, "/Poll") {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		mu.Lock()
		polls++
		mu.Unlock()
		err := invoker(ctx, method, req, reply, cc, opts...)
		mu.Lock()
		if err != nil && refused == nil && errors.As(serviceerror.FromStatus(status.Convert(err)), new(*serviceerror.InvalidArgument)) {
			refused = err
		}
		mu.Unlock()
		return err
	}
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: "default",
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(watchPolls)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	cfg := testConfig(t)
	cfg.Temporal.HostPort = hostPort
	cfg.Instance = strings.Repeat("i", 1100)
	w := newWorker(t, cfg, zaptest.NewLogger(t), c)
	started(t, w)
	// A refused poll comes back at once; an accepted one waits for a task.
	time.Sleep(5 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if refused != nil {
		t.Fatalf("a poll of the worker with a %d-byte --instance was refused: %v", len(cfg.Instance), refused)
	}
	if polls == 0 {
		t.Fatal("the worker made no poll in 5 s")
	}
}

// A worker's identity names its instance whole while it fits, as Temporal Web has always
// shown it, and a cut one keeps apart from other cut ones by its shard id.
func TestWorkerIdentityCutsOnlyALongInstance(t *testing.T) {
	if got := workerIdentity(42, "vm", "w1", "s"); got != "42@vm/w1" {
		t.Fatalf("identity of a short instance = %q, want 42@vm/w1", got)
	}
	long := strings.Repeat("é", 1000)
	got := workerIdentity(42, "vm", long, "7fd18772-0004-55b2-8d4d-38307e5b3f8a")
	if len(got) > 400 || !strings.HasSuffix(got, "/7fd18772-0004-55b2-8d4d-38307e5b3f8a") || !utf8.ValidString(got) {
		t.Fatalf("identity of a %d-byte instance = %q (%d bytes)", len(long), got, len(got))
	}
}
