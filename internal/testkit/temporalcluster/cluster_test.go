package temporalcluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

func dial(t *testing.T, c *temporalcluster.Cluster, ns string) client.Client {
	t.Helper()
	cl, err := temporaladmin.Dial(context.Background(), temporaladmin.Config{HostPort: c.HostPort(), Namespace: ns}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestClusterSurvivesServerAndPostgresRestarts: a workflow with a timer and activities
// started before each restart completes after it — a graceful server restart, a crash
// (SIGKILL) of the server, and an immediate (crash-like) PostgreSQL restart under a running
// server.
func TestClusterSurvivesServerAndPostgresRestarts(t *testing.T) {
	testtemporal.SkipShort(t)
	c, cl := testtemporal.StartCluster(t, testtemporal.Options{NoSearchAttributes: true})
	const queue = "temporalcluster-test"
	w := sdkworker.New(cl, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, n int) (int, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		sum := 0
		for i := range n {
			if err := workflow.Sleep(ctx, time.Second); err != nil {
				return 0, err
			}
			var v int
			if err := workflow.ExecuteActivity(ctx, "double", i).Get(ctx, &v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}, workflow.RegisterOptions{Name: "sum"})
	w.RegisterActivityWithOptions(func(_ context.Context, i int) (int, error) { return 2 * i, nil }, activity.RegisterOptions{Name: "double"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	restarts := []struct {
		name string
		do   func() error
	}{
		{"server graceful", func() error { return c.RestartServer(ctx, false) }},
		{"server killed", func() error { return c.RestartServer(ctx, true) }},
		{"postgres immediate", func() error { return c.RestartPostgres(ctx, temporalcluster.Immediate) }},
		{"postgres fast", func() error { return c.RestartPostgres(ctx, temporalcluster.Fast) }},
	}
	for i, r := range restarts {
		run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("sum-%d", i), TaskQueue: queue}, "sum", 4)
		if err != nil {
			t.Fatalf("%s: start: %v", r.name, err)
		}
		time.Sleep(1500 * time.Millisecond) // mid-workflow
		start := time.Now()
		if err := r.do(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		t.Logf("%s: back in %s", r.name, time.Since(start).Round(time.Millisecond))
		var sum int
		if err := run.Get(ctx, &sum); err != nil || sum != 12 {
			t.Fatalf("%s: workflow result %d, %v; want 12", r.name, sum, err)
		}
	}
}

// TestSQLVisibilitySearchAttributeSlots: on SQL visibility a custom search attribute is an
// alias of a pre-allocated column, per namespace: 10 Keyword, 3 Int (and 3 each of Bool,
// Double, Datetime, Text, KeywordList). walkeeper needs 2 Keyword and 1 Int. This registers
// them with the worker's own code, fills the rest, and records what happens when a type's
// slots are gone: registration fails with InvalidArgument, and so does a worker's start in a
// namespace whose slots others took.
func TestSQLVisibilitySearchAttributeSlots(t *testing.T) {
	testtemporal.SkipShort(t)
	c, cl := testtemporal.StartCluster(t, testtemporal.Options{NoSearchAttributes: true, ExtraNamespaces: []string{"full", "race"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// walkeeper's attributes register (and re-register, idempotently).
	for range 2 {
		if err := temporaladmin.EnsureSearchAttributes(ctx, cl, "default"); err != nil {
			t.Fatalf("EnsureSearchAttributes on SQL visibility: %v", err)
		}
	}
	// Fill the remaining Keyword and Int slots one by one until the server refuses.
	for typ, slots := range map[enumspb.IndexedValueType]int{enumspb.INDEXED_VALUE_TYPE_KEYWORD: 10, enumspb.INDEXED_VALUE_TYPE_INT: 3} {
		free := 0
		for i := 0; ; i++ {
			_, err := cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
				Namespace: "default", SearchAttributes: map[string]enumspb.IndexedValueType{fmt.Sprintf("Other%s%02d", typ, i): typ}})
			if err == nil {
				free++
				continue
			}
			if _, ok := errors.AsType[*serviceerror.InvalidArgument](err); !ok || !strings.Contains(err.Error(), "cannot have more than") {
				t.Fatalf("adding %s attribute %d: %v (want InvalidArgument: cannot have more than ...)", typ, i, err)
			}
			t.Logf("%s slots: walkeeper uses %d, %d more fit, then: %v", typ, used(typ), free, err)
			break
		}
		if got := used(typ) + free; got != slots {
			t.Errorf("%s slots per namespace: %d, want %d", typ, got, slots)
		}
	}

	// A namespace whose Int slots are all taken by another application: the worker's start
	// (EnsureSearchAttributes) fails loudly instead of running without WalPending.
	full := dial(t, c, "full")
	for i := range 3 {
		if _, err := full.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: "full", SearchAttributes: map[string]enumspb.IndexedValueType{fmt.Sprintf("Foreign%02d", i): enumspb.INDEXED_VALUE_TYPE_INT}}); err != nil {
			t.Fatal(err)
		}
	}
	err := temporaladmin.EnsureSearchAttributes(ctx, full, "full")
	if err == nil || !strings.Contains(err.Error(), "cannot have more than 3 search attribute of type Int") {
		t.Fatalf("EnsureSearchAttributes with no Int slot left = %v, want the server's InvalidArgument", err)
	}
	t.Logf("no slot left: %v", err)

	// Several workers of a fleet starting at once on a fresh namespace.
	race := dial(t, c, "race")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			errs[i] = temporaladmin.EnsureSearchAttributes(ctx, race, "race")
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent EnsureSearchAttributes %d: %v", i, err)
		}
	}
	// The server picks a free column per attribute (in map order) and rejects only a column
	// allocated twice, not an alias allocated twice: racing registrations could map one
	// attribute to two columns. Each must have exactly one.
	desc, err := race.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "race"})
	if err != nil {
		t.Fatal(err)
	}
	columns := map[string][]string{}
	for field, alias := range desc.GetConfig().GetCustomSearchAttributeAliases() {
		columns[alias] = append(columns[alias], field)
	}
	for name := range contract.SearchAttributes {
		if len(columns[name]) != 1 {
			t.Errorf("after concurrent registration, %s is mapped to columns %v, want exactly one", name, columns[name])
		}
	}
	t.Logf("column per attribute after concurrent registration: %v", columns)
}

func used(typ enumspb.IndexedValueType) int {
	n := 0
	for _, t := range contract.SearchAttributes {
		if t == typ {
			n++
		}
	}
	return n
}
