package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/internal/testkit/testservers"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// TestComposeClusterWithoutDocker runs what `docker compose up` runs, minus Docker: the
// s3 service's server (versitygw, natively), the PostgreSQL-backed Temporal server, the
// `schedule` one-shot, and one worker per worker-* service configured from exactly the
// environment docker-compose.yml gives it (only host names are rewritten to loopback). Then it
// does what the file's header tells a person to try: create a store, append through two
// workers, merge through a third, read the merged base, and find the MergeWal in Temporal's
// visibility by its WalTarget search attribute, as Temporal Web would.
func TestComposeClusterWithoutDocker(t *testing.T) {
	testtemporal.SkipShort(t)
	services := composeServices(t)
	var workers []string
	for name, svc := range services {
		if len(svc.Command) > 0 && svc.Command[0] == "worker" {
			workers = append(workers, name)
		}
	}
	sort.Strings(workers)
	if len(workers) < 3 {
		t.Fatalf("workers %v", workers)
	}

	// Service "s3": the same server and version, natively, with a bucket of its own.
	vgw, _ := testservers.Lookup(testservers.VersityGW)
	s3 := vgw.Start(t)
	bucket := strings.TrimPrefix(s3.URL[:strings.Index(s3.URL, "?")], "s3://")
	// Service "temporal": the same server version, persistence and visibility.
	cluster, tc := testtemporal.StartCluster(t, testtemporal.Options{})
	hostPort := cluster.HostPort()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	rewrite := func(k, v string) string {
		switch k {
		case "WALKEEPER_STORAGE":
			return strings.Replace(strings.Replace(v, "http://s3:9000", s3.Endpoint, 1), "s3://walkeeper?", "s3://"+bucket+"?", 1)
		case "WALKEEPER_TEMPORAL":
			return hostPort
		case "WALKEEPER_LISTEN":
			return "127.0.0.1:0"
		case "AWS_ACCESS_KEY_ID": // the native server runs with the test keys, not compose's
			return s3test.AccessKeyID
		case "AWS_SECRET_ACCESS_KEY":
			return s3test.SecretAccessKey
		}
		return v
	}
	setEnv := func(env map[string]string) {
		for k := range env {
			if strings.HasPrefix(k, "WALKEEPER_") || strings.HasPrefix(k, "AWS_") {
				t.Setenv(k, rewrite(k, env[k]))
			}
		}
	}

	// Service "temporal-namespace": deploy/temporal/create-namespace.sh, natively, twice (a
	// second `up` runs it again), for a namespace the cluster did not register; then the
	// namespace must be served.
	cli, err := devserver.FindCLI("")
	if err != nil {
		t.Fatalf("temporal CLI for the namespace script: %v", err)
	}
	root, err := cachebin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, "deploy/temporal/create-namespace.sh"))
		cmd.Env = append(os.Environ(), "TEMPORAL_CLI="+cli, "TEMPORAL_ADDRESS="+hostPort, "DEFAULT_NAMESPACE=compose-namespace")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("create-namespace.sh: %v\n%s", err, out)
		}
	}
	if _, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "compose-namespace"}); err != nil {
		t.Fatalf("namespace registered by create-namespace.sh: %v", err)
	}

	// Service "schedule": `walkeeper schedule ensure --every 1m` with its environment.
	setEnv(services["schedule"].Environment)
	if err := temporaladmin.EnsureSweepSchedule(ctx, tc, temporaladmin.SweepSchedule{Every: time.Minute, Jitter: temporaladmin.DefaultScheduleJitter}); err != nil {
		t.Fatalf("schedule ensure: %v", err)
	}

	addrs := map[string]string{}
	for _, name := range workers {
		for _, kv := range os.Environ() { // only what this service sets: clear the previous one's
			if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "WALKEEPER_") {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
		}
		setEnv(services[name].Environment)
		// The worker's own flags read the environment, as `walkeeper worker` with no flags does.
		cfg := worker.DefaultConfig()
		cfg.RegisterFlags(pflag.NewFlagSet(name, pflag.ContinueOnError))
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: config from its compose environment: %v", name, err)
		}
		if cfg.Instance != name {
			t.Fatalf("%s: instance %q", name, cfg.Instance)
		}
		w, err := worker.New(cfg, zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel)).Named(name), tc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatalf("%s: start: %v", name, err)
		}
		t.Cleanup(func() { _ = w.Stop(context.Background()) })
		addrs[name] = "http://" + w.HTTPAddr()
	}

	api := apitest.Client{T: t, Ctx: ctx}
	call := func(method, url, body string, want int) []byte {
		t.Helper()
		r := api.Do(method, url, body)
		if r.Status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, url, r.Status, r.Body, want)
		}
		return r.Body
	}
	w0, w1, w2 := addrs[workers[0]], addrs[workers[1]], addrs[workers[2]]
	for _, a := range []string{w0, w1, w2} {
		call("GET", a+"/healthz", "", 200)
	}
	call("POST", w0+"/api/v1/stores/generic/demo",
		`{"fields":[{"name":"id","type":"string"},{"name":"n","type":"int64","nullable":true}]}`, 201)
	call("POST", w0+"/api/v1/stores/generic/demo/rows", `[{"id":"a","n":1}]`, 200)
	call("POST", w1+"/api/v1/stores/generic/demo/rows", `[{"id":"a","n":2},{"id":"b","n":3}]`, 200)
	call("POST", w0+"/api/v1/stores/generic/demo/flush", "", 200)
	call("POST", w1+"/api/v1/stores/generic/demo/flush", "", 200)

	var merged struct {
		WorkflowID string `json:"workflow_id"`
		Result     struct {
			Reclaimed int `json:"reclaimed"`
		} `json:"result"`
	}
	if err := json.Unmarshal(call("POST", w2+"/api/v1/stores/generic/demo/merge-wal?wait=true", "", 200), &merged); err != nil {
		t.Fatal(err)
	}
	if merged.WorkflowID != "merge-wal/generic/demo" || merged.Result.Reclaimed < 1 {
		t.Fatalf("merge: %+v", merged)
	}
	rows := call("GET", w2+"/api/v1/stores/generic/demo/rows?source=base", "", 200)
	if !bytes.Contains(rows, []byte(`{"id":"a","n":2}`)) || !bytes.Contains(rows, []byte(`{"id":"b","n":3}`)) {
		t.Fatalf("base rows after merge: %s", rows)
	}

	// What Temporal Web shows: the merge, found by its search attribute.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: `WalTarget = "generic:demo" AND WorkflowType = "MergeWal"`,
		})
		if err == nil && len(resp.Executions) > 0 {
			if id := resp.Executions[0].Execution.WorkflowId; id != "merge-wal/generic/demo" {
				t.Fatalf("visibility found %s", id)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MergeWal not visible by WalTarget: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	desc, err := tc.ScheduleClient().GetHandle(ctx, temporaladmin.SweepScheduleID).Describe(ctx)
	if err != nil {
		t.Fatalf("sweep schedule: %v", err)
	}
	if desc.Schedule.State.Paused {
		t.Fatal("sweep schedule paused")
	}
}
