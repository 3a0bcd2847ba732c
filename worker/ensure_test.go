package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// lateClient dials hostPort's default namespace with a client that answers the first late[m]
// calls of each gRPC method whose name ends in m (e.g. "/CreateSchedule") DeadlineExceeded, as
// a Temporal that has just started answers; a negative count answers every call late.
func lateClient(t *testing.T, hostPort string, late map[string]int) client.Client {
	t.Helper()
	var mu sync.Mutex
	answerLate := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		isLate := false
		for suffix, n := range late {
			if strings.HasSuffix(method, suffix) && n != 0 {
				isLate = true
				if n > 0 {
					late[suffix] = n - 1
				}
			}
		}
		mu.Unlock()
		if isLate {
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: hostPort, Namespace: temporaladmin.DefaultNamespace,
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(answerLate)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startEnsuringWorker starts a worker with the sweep and reconcile schedules on c, ensuring
// them for at most within, and returns it with its logs.
func startEnsuringWorker(t *testing.T, c client.Client, within time.Duration) (*Worker, *observer.ObservedLogs) {
	t.Helper()
	cfg := testConfig(t)
	cfg.SweepInterval, cfg.ReconcileInterval = time.Minute, time.Hour
	core, logs := observer.New(zapcore.InfoLevel)
	w := newWorker(t, cfg, zap.New(core), c)
	w.ensureWithin = within
	return started(t, w), logs
}

// waitUntil polls cond every 100 ms until it holds, failing t after a generous cap.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A Temporal that answers the worker's first schedule calls late, as a server that has just
// started does, still gets both schedules: the worker tries again. One that never answers in
// time gets an error line per schedule, and the worker runs on; a shutdown ends the retries.
func TestWorkerEnsuresSchedulesThroughLateAnswers(t *testing.T) {
	testtemporal.SkipShort(t)
	hostPort, tc := testtemporal.StartWithOptions(t, testtemporal.Options{})

	t.Run("late at first", func(t *testing.T) {
		// The first two creates, both the sweep schedule's: it is tried a third time.
		startEnsuringWorker(t, lateClient(t, hostPort, map[string]int{"/CreateSchedule": 2}), time.Minute)
		for _, id := range []string{temporaladmin.SweepScheduleID, temporaladmin.ReconcileScheduleID} {
			waitUntil(t, "schedule "+id, func() bool {
				_, err := temporaladmin.DescribeSchedule(context.Background(), tc, id)
				return err == nil
			})
		}
	})

	t.Run("never in time", func(t *testing.T) {
		// Both schedules exist by now: ensuring them again describes them.
		c := lateClient(t, hostPort, map[string]int{"/DescribeSchedule": -1})
		_, logs := startEnsuringWorker(t, c, 1500*time.Millisecond)
		waitUntil(t, "error line for each schedule", func() bool {
			return logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("could not ensure schedule").Len() == 2
		})
	})

	t.Run("stopped while retrying", func(t *testing.T) {
		c := lateClient(t, hostPort, map[string]int{"/DescribeSchedule": -1})
		w, logs := startEnsuringWorker(t, c, time.Hour)
		waitUntil(t, "retry", func() bool {
			return logs.FilterMessageSnippet("ensuring the schedule again").Len() > 0
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if n := logs.FilterMessageSnippet("could not ensure schedule").Len(); n != 0 {
			t.Fatalf("%d error lines for a retry that the shutdown ended", n)
		}
	})
}

// A Temporal that answers the worker's first search-attribute call late still gets walkeeper's
// search attributes before the start returns: every start of a merge needs them.
func TestWorkerRegistersSearchAttributesThroughALateAnswer(t *testing.T) {
	testtemporal.SkipShort(t)
	hostPort, tc := testtemporal.StartWithOptions(t, testtemporal.Options{NoSearchAttributes: true})
	startEnsuringWorker(t, lateClient(t, hostPort, map[string]int{"/ListSearchAttributes": 1}), time.Minute)
	resp, err := tc.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: temporaladmin.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range contract.SearchAttributes {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
			t.Errorf("search attribute %s: %v (registered %v), want %v", name, got, ok, typ)
		}
	}
}

// A walkeeper search attribute that someone registered with another type fails the worker's
// start, naming it: started, every merge of every store would fail its workflow task on the
// attribute's first upsert until its run timeout, and then the next one.
func TestFindingSearchAttributeOfAnotherTypeFailsTheStart(t *testing.T) {
	testtemporal.SkipShort(t)
	_, tc := testtemporal.StartWithOptions(t, testtemporal.Options{NoSearchAttributes: true})
	ctx := context.Background()
	if _, err := tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        temporaladmin.DefaultNamespace,
		SearchAttributes: map[string]enumspb.IndexedValueType{contract.WalReclaimedName: enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	}); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, testConfig(t), zap.NewNop(), tc)
	err := w.Start(ctx)
	if err == nil {
		_ = w.Stop(ctx)
		t.Fatal("the worker started with WalReclaimed registered as Keyword")
	}
	if !errors.Is(err, temporaladmin.ErrSearchAttributeType) || !strings.Contains(err.Error(), "WalReclaimed is registered as Keyword") {
		t.Fatalf("Start: %v, want the wrong type of WalReclaimed named", err)
	}
}
